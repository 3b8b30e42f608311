"""The `asr-pipeline` command line: each subcommand end to end on a tiny generated corpus.

Eight sine-tone WAVs (0.5..1.2 s) with upper-case, punctuated .txt sidecars; the tokenizer, shards and the
tiny training run are built once per module and shared by the tests that read them.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from asr_pipeline.cli import build_parser, main, train_config_from_args
from asr_pipeline.io.audio import NOT_AUDIO
from asr_pipeline.io.shards import SHARD_SCHEMA
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import resolve_config, save_json
from tests.conftest import PROJECT_ROOT, TINY_SENTENCES, make_wav

NUM_UTTERANCES = 8
SENTENCES = TINY_SENTENCES[:NUM_UTTERANCES]
VAL_MANIFEST_FLAGS = [
    "--val-manifest",
    "--validation-manifest",
    "--valid-manifest",
    "--validation-set",
    "--val-set",
]
CONSOLE_SCRIPT = Path(sys.executable).with_name("asr-pipeline")


def write_audio_folder(folder: Path, bad_file: bool = False) -> Path:
    """One WAV + .txt sidecar per sentence; the sidecars are shouted ("THE QUICK ... DOG!")."""
    folder.mkdir(parents=True)
    for i, sentence in enumerate(SENTENCES):
        (folder / f"utt{i:02d}.wav").write_bytes(make_wav(seconds=0.5 + 0.1 * i, freq=300.0 + 40 * i))
        (folder / f"utt{i:02d}.txt").write_text(sentence.upper() + "!", encoding="utf-8")
    if bad_file:
        (folder / "broken.wav").write_bytes(b"this is not audio" * 8)
        (folder / "broken.txt").write_text("a broken recording", encoding="utf-8")
    return folder


def cli(*parts: object) -> int:
    """``main`` with its arguments given as paths, numbers or strings."""
    return main([str(part) for part in parts])


def run_quietly(*parts: object) -> dict:
    """``cli`` for module fixtures (no capsys there): must succeed; returns the printed JSON."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert cli(*parts) == 0, parts
    return json.loads(stdout.getvalue())


def train_config(*parts: object) -> tuple:
    """What ``train`` would save and launch with these flags (no torchrun)."""
    return train_config_from_args(build_parser().parse_args(["train", *map(str, parts)]))


def printed_json(capsys: pytest.CaptureFixture) -> dict:
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def audio_folder(workdir: Path) -> Path:
    return write_audio_folder(workdir / "audio")


@pytest.fixture(scope="module")
def tokenizer_model(workdir: Path, audio_folder: Path) -> Path:
    run_quietly("tokenizer", "--input", audio_folder, "--output-dir", workdir / "tok", "--vocab-size", "40")
    return workdir / "tok" / "tokenizer.model"


@pytest.fixture(scope="module")
def shard_folder(workdir: Path, audio_folder: Path, tokenizer_model: Path) -> Path:
    output = workdir / "shards"
    run_quietly(
        "extract-features", "--input", audio_folder, "--output", output, "--tokenizer", tokenizer_model,
        "--shard-size", "3",
    )  # fmt: skip
    return output


@pytest.fixture(scope="module")
def trained_run(workdir: Path, shard_folder: Path, tokenizer_model: Path) -> Path:
    """The tiny model, 1 epoch, 1 process under torchrun (~10 s on 2 CPU cores)."""
    run_dir = workdir / "run"
    run_quietly(
        "train", "--train-manifest", shard_folder, "--val-set", shard_folder / "shard-00002.parquet",
        "--tokenizer", tokenizer_model, "--output-dir", run_dir, "--variant", "tiny",
        "--epochs", 1, "--lr-warmup-steps", 1, "--learning-rate", 1e-3, "--log-every", 1,
    )  # fmt: skip
    return run_dir


# --- tokenizer ------------------------------------------------------------------------------------------
def test_tokenizer_on_a_text_file_writes_a_loadable_model_and_prints_pieces_plus_one(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TINY_SENTENCES) + "\n\n\n", encoding="utf-8")  # blank lines are not sentences

    status = cli(
        "tokenizer", "--input", corpus, "--output-dir", tmp_path / "tok", "--model-prefix", "spm",
        "--vocab-size", "40", "--blank-id", "2",
    )  # fmt: skip
    summary = printed_json(capsys)

    assert status == 0
    tokenizer = CTCTokenizer.from_file(tmp_path / "tok" / "spm.model", blank_id=2)
    assert summary["vocab_size"] == tokenizer.num_pieces + 1 == 41
    assert summary["blank_id"] == 2
    assert summary["report"]["kept"] == len(TINY_SENTENCES)
    vocab_lines = (tmp_path / "tok" / "spm.vocab").read_text(encoding="utf-8").splitlines()
    assert len(vocab_lines) == tokenizer.num_pieces


def test_tokenizer_on_an_audio_folder_trains_on_normalized_sidecar_transcripts(tmp_path, capsys):
    folder = write_audio_folder(tmp_path / "audio")
    common = ["tokenizer", "--input", folder, "--vocab-size", "40", "--model-type", "char"]

    cli(*common, "--output-dir", tmp_path / "normalized")
    normalized = printed_json(capsys)
    cli(*common, "--output-dir", tmp_path / "raw", "--no-lowercase", "--keep-punctuation")
    raw = printed_json(capsys)

    assert normalized["report"]["seen"] == NUM_UTTERANCES
    pieces = CTCTokenizer.from_file(normalized["model"]).pieces()
    assert not any(piece.isupper() or "!" in piece for piece in pieces), (
        "sidecars are lowercased, '!' dropped"
    )
    raw_pieces = CTCTokenizer.from_file(raw["model"]).pieces()
    assert "T" in raw_pieces and "!" in raw_pieces
    assert raw["normalization"] == {"unicode_form": "NFKC", "lowercase": False, "strip_punctuation": False}


def test_a_tokenizer_too_large_for_the_corpus_exits_1_with_the_library_message(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a tiny corpus\n", encoding="utf-8")

    status = cli("tokenizer", "--input", corpus, "--output-dir", tmp_path)  # the default --vocab-size 256
    err = capsys.readouterr().err

    assert status == 1
    assert err.startswith("asr-pipeline tokenizer: error: SentencePiece training failed")
    assert "Traceback" not in err


# --- extract-features -----------------------------------------------------------------------------------
def test_extract_features_to_a_folder_writes_numbered_shards_of_shard_size(shard_folder, tokenizer_model):
    names = sorted(path.name for path in shard_folder.iterdir())
    tables = [pq.read_table(shard_folder / name) for name in names]
    tokenizer = CTCTokenizer.from_file(tokenizer_model)

    assert names == ["shard-00000.parquet", "shard-00001.parquet", "shard-00002.parquet"]
    assert [table.num_rows for table in tables] == [3, 3, 2], "8 examples in shards of 3"
    for table in tables:
        assert table.schema.equals(SHARD_SCHEMA)
        for row in table.select(["text", "tokens", "cols"]).to_pylist():
            assert row["text"] in SENTENCES, "the sidecar's 'THE ... DOG!' is normalized"
            assert row["tokens"] == tokenizer.encode(row["text"])
            assert row["cols"] == 80


def test_extract_features_to_a_parquet_file_writes_one_shard_and_stops_at_max_samples(
    tmp_path, audio_folder, tokenizer_model, capsys
):
    output = tmp_path / "sub" / "two.parquet"

    status = cli(
        "extract-features", "--input", audio_folder, "--output", output, "--tokenizer", tokenizer_model,
        "--max-samples", "2",
    )  # fmt: skip
    report = printed_json(capsys)

    assert status == 0
    assert report["shards"] == [str(output)] and report["kept"] == 2 and report["stopped_at_max_samples"]
    table = pq.read_table(output)
    assert table.schema.equals(SHARD_SCHEMA)
    assert table.column("id").to_pylist() == ["utt00", "utt01"]
    assert report["frames"] == sum(table.column("rows").to_pylist())


def test_a_bad_audio_file_is_skipped_and_counted_in_the_printed_report(tmp_path, tokenizer_model, capsys):
    folder = write_audio_folder(tmp_path / "audio", bad_file=True)

    status = cli(
        "extract-features", "--input", folder, "--output", tmp_path / "out", "--tokenizer", tokenizer_model
    )
    report = printed_json(capsys)

    assert status == 0
    assert (report["seen"], report["kept"], report["skipped"]) == (NUM_UTTERANCES + 1, NUM_UTTERANCES, 1)
    assert report["skipped_by_reason"] == {NOT_AUDIO: 1}
    assert "broken.wav" in report["first_skipped"][NOT_AUDIO][0]
    assert pq.read_table(tmp_path / "out" / "shard-00000.parquet").num_rows == NUM_UTTERANCES


def test_a_bad_audio_file_in_strict_mode_exits_1_naming_the_file(tmp_path, tokenizer_model, capsys):
    folder = write_audio_folder(tmp_path / "audio", bad_file=True)

    status = cli(
        "extract-features", "--input", folder, "--output", tmp_path / "out.parquet",
        "--tokenizer", tokenizer_model, "--strict",
    )  # fmt: skip
    err = capsys.readouterr().err

    assert status == 1
    error_lines = [line for line in err.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and error_lines[0].startswith("asr-pipeline extract-features: error: ")
    assert str(folder / "broken.wav") in error_lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "out.parquet").exists()


def test_debug_prints_the_traceback_behind_the_one_line_error(tmp_path, tokenizer_model, capsys, monkeypatch):
    monkeypatch.setenv("ASR_PIPELINE_DEBUG", "0")  # off; --debug turns it on, and the test puts it back
    folder = write_audio_folder(tmp_path / "audio", bad_file=True)

    status = cli(
        "--debug", "extract-features", "--input", folder, "--output", tmp_path / "out.parquet",
        "--tokenizer", tokenizer_model, "--strict",
    )  # fmt: skip
    err = capsys.readouterr().err

    assert status == 1
    assert "Traceback (most recent call last)" in err and "InputError" in err
    assert err.strip().splitlines()[-1].startswith("asr-pipeline extract-features: error: ")


def test_extract_features_with_two_jobs_writes_the_same_bytes_as_one_job(
    tmp_path, audio_folder, tokenizer_model, shard_folder, capsys
):
    output = tmp_path / "shards"

    status = cli(
        "extract-features", "--input", audio_folder, "--output", output, "--tokenizer", tokenizer_model,
        "--shard-size", "3", "--jobs", "2",
    )  # fmt: skip
    report = printed_json(capsys)

    assert status == 0 and report["kept"] == NUM_UTTERANCES
    names = sorted(path.name for path in shard_folder.iterdir())  # written with the default --jobs 1
    assert names == sorted(path.name for path in output.iterdir())
    for name in names:
        assert (output / name).read_bytes() == (shard_folder / name).read_bytes(), name


def test_extract_features_rejects_jobs_below_one(tmp_path, audio_folder, tokenizer_model, capsys):
    status = cli(
        "extract-features", "--input", audio_folder, "--output", tmp_path / "out", "--tokenizer", tokenizer_model,
        "--jobs", "0",
    )  # fmt: skip

    assert status == 2
    assert "--jobs must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_id_repeated_across_inputs_is_skipped_and_counted(tmp_path, audio_folder, tokenizer_model, capsys):
    status = cli(
        "extract-features", "--input", audio_folder, "--input", audio_folder,
        "--output", tmp_path / "out.parquet", "--tokenizer", tokenizer_model,
    )  # fmt: skip
    report = printed_json(capsys)

    assert status == 0
    assert (report["seen"], report["kept"]) == (2 * NUM_UTTERANCES, NUM_UTTERANCES)
    assert report["skipped_by_reason"] == {"duplicate id": NUM_UTTERANCES}
    assert pq.read_table(tmp_path / "out.parquet").num_rows == NUM_UTTERANCES


# --- train ----------------------------------------------------------------------------------------------
TRAIN_FLAGS = [
    "--config", "--train-manifest", *VAL_MANIFEST_FLAGS, "--tokenizer", "--output-dir",
    "--architecture", "--variant", "--d-model", "--num-layers", "--num-heads", "--dropout", "--vocab-size",
    "--blank-id", "--epochs", "--learning-rate", "--weight-decay", "--lr-warmup-steps", "--lr-hold-steps",
    "--lr-decay-steps", "--lr-min", "--gradient-clip-norm", "--gradient-clip-value",
    "--gradient-accumulation-steps", "--ema-decay", "--ema-start-step", "--input-dim", "--batch-size",
    "--adaptive-batch-budget", "--adaptive-batch-max-samples", "--sort-buffer-size", "--max-train-samples",
    "--max-val-samples", "--max-audio-duration-sec", "--num-workers", "--spec-time-masks",
    "--spec-time-mask-max-frames", "--spec-freq-masks", "--spec-freq-mask-max-bins", "--seed",
    "--resume-from", "--init-from", "--dry-run", "--log-every", "--checkpoint-every-steps", "--backend",
    "--precision", "--nproc-per-node",
]  # fmt: skip


def test_train_help_lists_every_flag(capsys):
    status = main(["train", "--help"])
    out = capsys.readouterr().out

    assert status == 0
    missing = [flag for flag in TRAIN_FLAGS if f"{flag} " not in out and f"{flag}\n" not in out]
    assert missing == []
    assert "{cpu,cuda}" in out and "{f32,bf16,f16}" in out


def test_every_commands_help_is_written_without_importing_torch():
    # The module docstring's promise, and ~3 s off every `kedro run` (kedro imports `asr_pipeline.cli`).
    code = (
        "import contextlib, io, json, sys\n"
        "from asr_pipeline.cli import build_parser, main\n"
        "[names] = [action.choices for action in build_parser()._actions if action.dest == 'command']\n"
        "for name in names:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main([name, '--help']) == 0, name\n"
        "print(json.dumps(sorted(names)), 'torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, imported = result.stdout.rsplit(" ", 1)
    [commands] = [action.choices for action in build_parser()._actions if action.dest == "command"]

    assert json.loads(names) == sorted(commands) and len(commands) >= 11
    assert imported.strip() == "False"


@pytest.mark.parametrize("flag", VAL_MANIFEST_FLAGS)
def test_every_val_manifest_alias_lands_in_data_val_manifests(flag, shard_folder):
    shard = str(shard_folder / "shard-00002.parquet")

    config, _ = train_config(
        "--train-manifest", shard_folder, flag, shard, "--epochs", 1, "--lr-warmup-steps", 0
    )

    assert config.data.val_manifests == [shard]
    assert config.data.train_manifests == [str(shard_folder / f"shard-0000{i}.parquet") for i in range(3)]


def test_flags_override_a_config_file_and_everything_else_comes_from_the_file(tmp_path, shard_folder):
    config_file = tmp_path / "training_config.json"
    save_json(
        resolve_config(
            {
                "data": {"train_manifests": [str(shard_folder / "shard-00000.parquet")], "batch_size": 4},
                "model": {"variant": "tiny"},
                "optim": {"epochs": 5, "lr_warmup_steps": 7, "weight_decay": 0.1},
                "run": {"output_dir": str(tmp_path / "from_file"), "log_every": 3},
            }
        ),
        config_file,
    )

    config, tokenizer = train_config("--config", config_file, "--epochs", 2, "--seed", 9)

    assert (config.optim.epochs, config.run.seed) == (2, 9), "flags win"
    assert (config.optim.lr_warmup_steps, config.optim.weight_decay, config.run.log_every) == (7, 0.1, 3)
    assert (config.model.variant, config.data.batch_size) == ("tiny", 4), "no CLI default overrides the file"
    assert config.run.output_dir == str(tmp_path / "from_file") and tokenizer is None


# Values differ from the config defaults so a flag that lands nowhere (or in the wrong field) fails.
FLAG_TO_FIELD = [
    ("--dropout", "model.dropout", "0.05", 0.05),
    ("--vocab-size", "model.vocab_size", "41", 41),
    ("--lr-hold-steps", "optim.lr_hold_steps", "3", 3),
    ("--lr-decay-steps", "optim.lr_decay_steps", "11", 11),
    ("--lr-min", "optim.lr_min", "1e-6", 1e-6),
    ("--gradient-clip-norm", "optim.gradient_clip_norm", "1.5", 1.5),
    ("--gradient-accumulation-steps", "optim.gradient_accumulation_steps", "4", 4),
    ("--ema-decay", "optim.ema_decay", "0.999", 0.999),
    ("--ema-start-step", "optim.ema_start_step", "100", 100),
    ("--input-dim", "data.input_dim", "64", 64),
    ("--adaptive-batch-max-samples", "data.adaptive_batch_max_samples", "16", 16),
    ("--adaptive-batch-unit", "data.adaptive_batch_unit", "duration-ms", "duration-ms"),
    ("--sort-buffer-size", "data.sort_buffer_size", "128", 128),
    ("--max-train-samples", "data.max_train_samples", "5", 5),
    ("--max-val-samples", "data.max_val_samples", "2", 2),
    ("--max-audio-duration-sec", "data.max_audio_duration_sec", "12.5", 12.5),
    ("--num-workers", "data.num_workers", "2", 2),
    ("--spec-time-masks", "data.spec_time_masks", "0", 0),
    ("--spec-time-mask-max-frames", "data.spec_time_mask_max_frames", "20", 20),
    ("--spec-freq-masks", "data.spec_freq_masks", "1", 1),
    ("--spec-freq-mask-max-bins", "data.spec_freq_mask_max_bins", "7", 7),
    ("--resume-from", "run.resume_from", "runs/previous", "runs/previous"),
    ("--init-from", "run.init_from", "runs/base/model.safetensors", "runs/base/model.safetensors"),
    ("--checkpoint-every-steps", "run.checkpoint_every_steps", "50", 50),
]


@pytest.mark.parametrize(
    ("flag", "field", "given", "expected"), FLAG_TO_FIELD, ids=[f[0] for f in FLAG_TO_FIELD]
)
def test_each_training_flag_lands_in_its_config_field(flag, field, given, expected, shard_folder):
    config, _ = train_config(
        "--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0, flag, given
    )

    section, name = field.split(".")
    default, _ = train_config("--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0)
    assert getattr(getattr(config, section), name) == expected
    assert getattr(getattr(default, section), name) != expected, "the value must differ from the default"


def test_dry_run_is_a_switch_that_sets_run_dry_run_and_is_off_unless_given(shard_folder):
    common = ["--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0]

    assert train_config(*common, "--dry-run")[0].run.dry_run is True
    assert train_config(*common)[0].run.dry_run is False


def test_unset_new_flags_keep_a_config_files_values(tmp_path, shard_folder):
    config_file = tmp_path / "training_config.json"
    save_json(
        resolve_config(
            {
                "data": {"train_manifests": [str(shard_folder / "shard-00000.parquet")], "num_workers": 3},
                "optim": {"epochs": 1, "lr_warmup_steps": 0, "ema_decay": 0.99, "gradient_clip_norm": 2.0},
                "run": {"output_dir": str(tmp_path / "run"), "dry_run": True, "checkpoint_every_steps": 7},
            }
        ),
        config_file,
    )

    config, _ = train_config("--config", config_file, "--seed", 1)

    assert (config.data.num_workers, config.optim.ema_decay, config.optim.gradient_clip_norm) == (
        3,
        0.99,
        2.0,
    )
    assert (config.run.dry_run, config.run.checkpoint_every_steps) == (True, 7)


def test_gradient_clip_value_alone_turns_the_default_norm_clip_off(shard_folder):
    common = ["--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0]

    config, _ = train_config(*common, "--gradient-clip-value", 0.5)

    assert train_config(*common)[0].optim.gradient_clip_norm == 5.0, "the norm clip is on by default"
    assert (config.optim.gradient_clip_value, config.optim.gradient_clip_norm) == (0.5, None)


def test_gradient_clip_norm_alone_overrides_a_config_files_value_clip(tmp_path, shard_folder):
    config_file = tmp_path / "training_config.json"
    save_json(
        resolve_config(
            {
                "data": {"train_manifests": [str(shard_folder / "shard-00000.parquet")]},
                "optim": {
                    "epochs": 1,
                    "lr_warmup_steps": 0,
                    "gradient_clip_norm": None,
                    "gradient_clip_value": 1.0,
                },
                "run": {"output_dir": str(tmp_path / "run")},
            }
        ),
        config_file,
    )

    config, _ = train_config("--config", config_file, "--gradient-clip-norm", 2.0)

    assert (config.optim.gradient_clip_norm, config.optim.gradient_clip_value) == (2.0, None)


def test_both_gradient_clips_exit_1_with_the_configs_message(tmp_path, shard_folder, capsys):
    status = cli(
        "train", "--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0,
        "--output-dir", tmp_path / "run", "--gradient-clip-norm", 1.0, "--gradient-clip-value", 0.5,
    )  # fmt: skip
    err = capsys.readouterr().err

    assert status == 1
    assert err.startswith("asr-pipeline train: error: ")
    assert "gradient_clip_value=0.5 and gradient_clip_norm=1.0 are both set" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists(), "rejected before anything is written"


@pytest.mark.slow  # a real torchrun worker, twice
@pytest.mark.parametrize("dry_run", [False, True], ids=["train", "dry-run"])
def test_train_on_audio_that_all_fails_to_decode_exits_1_naming_the_file(
    dry_run, tmp_path, tokenizer_model, capsys
):
    wav = make_wav(seconds=1.0)
    (tmp_path / "cut.wav").write_bytes(wav[: len(wav) // 3])  # its header reads fine: skipped when decoded
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(json.dumps({"id": "cut", "audio_path": "cut.wav", "text": "the cat"}) + "\n")

    status = cli(
        "train", "--train-manifest", manifest, "--tokenizer", tokenizer_model, "--output-dir", tmp_path / "run",
        "--epochs", 1, "--batch-size", 1, *(["--dry-run"] if dry_run else []),
    )  # fmt: skip
    last = capsys.readouterr().err.strip().splitlines()[-1]

    assert status == 1
    assert (
        last.startswith("asr-pipeline train: error: training failed: ")
        and "NothingKeptError: training: all 1" in last
    )
    assert f"{manifest}:1: truncated audio" in last
    assert not (tmp_path / "run" / "checkpoint_latest.json").exists()


def test_train_without_a_config_needs_only_the_training_manifests(capsys):
    # --epochs and the schedule have the reference trainer's defaults (500 epochs, the epoch schedule).
    status = main(["train", "--variant", "tiny"])
    err = capsys.readouterr().err

    assert status == 2
    assert (
        err
        == "asr-pipeline train: error: without --config, --train-manifest (or --manifest-dir) must be given\n"
    )


def test_train_runs_one_torchrun_process_and_writes_a_self_contained_run_dir(trained_run, tokenizer_model):
    events = [json.loads(line) for line in (trained_run / "events.jsonl").read_text().splitlines()]
    saved = json.loads((trained_run / "training_config.json").read_text())

    assert (trained_run / "checkpoint_latest.json").is_file()
    assert (trained_run / "checkpoint_latest" / "model.safetensors").is_file()
    summary = next(event for event in events if event["type"] == "summary")["values"]
    assert summary["world_size"] == 1
    assert saved["model"]["variant"] == "tiny" and saved["optim"]["epochs"] == 1
    assert saved["run"]["tokenizer"] == str(trained_run / "tokenizer.model")
    assert (trained_run / "tokenizer.model").read_bytes() == tokenizer_model.read_bytes()
    assert any(event["type"] == "validation" for event in events)


def test_dry_run_on_the_tiny_variant_runs_one_process_and_writes_dry_run_metrics(
    tmp_path, shard_folder, tokenizer_model, capsys
):
    run_dir = tmp_path / "dry"

    status = cli(
        "train", "--train-manifest", shard_folder, "--tokenizer", tokenizer_model, "--output-dir", run_dir,
        "--variant", "tiny", "--epochs", 1, "--lr-warmup-steps", 1, "--dry-run",
    )  # fmt: skip
    printed = printed_json(capsys)

    assert status == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["dry_run"] is True and metrics["steps"] == 0 and metrics["loss"] > 0
    assert printed["dry_run"] is True and printed["run_dir"] == str(run_dir)
    assert json.loads((run_dir / "training_config.json").read_text())["run"]["dry_run"] is True
    assert not (run_dir / "checkpoint_latest.json").exists(), "a dry run writes no checkpoint"


# --- decode ---------------------------------------------------------------------------------------------
def test_decode_prints_wer_and_cer_and_writes_one_hypothesis_per_utterance(
    tmp_path, trained_run, shard_folder, capsys
):
    output = tmp_path / "hyp" / "dev.jsonl"

    status = cli(
        "decode", "--run-dir", trained_run, "--input", shard_folder, "--output", output,
        "--decoder", "lexicon_free", "--beam-width", "2",
    )  # fmt: skip
    metrics = printed_json(capsys)

    assert status == 0
    assert metrics["utterances"] == NUM_UTTERANCES
    for method in ("greedy", "lexicon_free"):
        assert set(metrics[method]) == {"wer", "cer"} and metrics[method]["cer"] >= 0
    assert metrics["decoding"]["decoder"] == "lexicon_free" and metrics["decoding"]["beam_width"] == 2
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [row["id"] for row in rows] == [f"utt{i:02d}" for i in range(NUM_UTTERANCES)]
    assert {row["reference"] for row in rows} == set(SENTENCES)
    assert all(set(row) == {"id", "reference", "greedy", "lexicon_free"} for row in rows)


def test_decode_with_a_kenlm_model_reports_the_fused_beam(tmp_path, trained_run, shard_folder, capsys):
    from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm

    arpa, _ = build_kenlm("\n".join(SENTENCES) + "\n", KenLMOptions(order=2, discount_fallback=True))
    (tmp_path / "lm.arpa").write_text(arpa, encoding="utf-8")

    status = cli(
        "decode", "--run-dir", trained_run, "--input", shard_folder / "shard-00000.parquet",
        "--decoder", "prefix_beam", "--lm", tmp_path / "lm.arpa", "--beam-width", "2", "--word-bonus", "0.5",
    )  # fmt: skip
    metrics = printed_json(capsys)

    assert status == 0 and metrics["utterances"] == 3
    assert set(metrics) == {"utterances", "greedy", "prefix_beam", "decoding"}
    assert metrics["decoding"]["word_score"] == 0.5


def test_decode_with_a_lexicon_takes_tuned_options_and_lets_flags_win(
    tmp_path, trained_run, shard_folder, capsys
):
    from asr_pipeline.decoding.lexicon import build_lexicon
    from asr_pipeline.decoding.lm import KenLMOptions, build_kenlm
    from asr_pipeline.text.tokenizer import CTCTokenizer

    arpa, _ = build_kenlm("\n".join(SENTENCES) + "\n", KenLMOptions(order=2, discount_fallback=True))
    (tmp_path / "lm.arpa").write_text(arpa, encoding="utf-8")
    tokenizer = CTCTokenizer.from_file(Path(trained_run) / "tokenizer.model")
    (tmp_path / "lexicon.txt").write_text(build_lexicon(SENTENCES, tokenizer)[0], encoding="utf-8")
    tuned = {"lexicon": {"decoder": "lexicon", "beam_width": 3, "lm_weight": 0.8, "word_score": 1.0}}
    (tmp_path / "decoding.json").write_text(json.dumps(tuned), encoding="utf-8")

    status = cli(
        "decode", "--run-dir", trained_run, "--input", shard_folder, "--decoder", "lexicon",
        "--lexicon", tmp_path / "lexicon.txt", "--lm", tmp_path / "lm.arpa", "--tuned", tmp_path / "decoding.json",
        "--lm-weight", "0.2",
    )  # fmt: skip
    metrics = printed_json(capsys)

    assert status == 0 and set(metrics["lexicon"]) == {"wer", "cer"}
    assert (metrics["decoding"]["beam_width"], metrics["decoding"]["lm_weight"]) == (3, 0.2)
    assert metrics["decoding"]["word_score"] == 1.0


def test_decode_with_the_lexicon_decoder_but_no_lexicon_is_a_usage_error(trained_run, shard_folder, capsys):
    assert cli("decode", "--run-dir", trained_run, "--input", shard_folder, "--decoder", "lexicon") == 2
    assert "--decoder lexicon needs --lexicon" in capsys.readouterr().err


# --- errors and the console script ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["tokenizer", "--input", "{missing}"],
        ["extract-features", "--input", "{missing}", "--output", "out", "--tokenizer", "{tokenizer}"],
        ["extract-features", "--input", "{audio}", "--output", "out", "--tokenizer", "{missing}"],
        ["index", "--input", "{missing}", "--output", "index.parquet"],
        ["train", "--train-manifest", "{missing}", "--epochs", "1", "--lr-warmup-steps", "0"],
        ["decode", "--run-dir", "{missing}", "--input", "{audio}"],
    ],
    ids=["tokenizer", "extract-features", "extract-features-tokenizer", "index", "train", "decode"],
)
def test_a_missing_input_exits_2_and_names_the_path(command, tmp_path, audio_folder, tokenizer_model, capsys):
    missing = tmp_path / "no" / "such.jsonl"
    paths = {"missing": missing, "audio": audio_folder, "tokenizer": tokenizer_model}

    status = main([part.format(**paths) for part in command])
    err = capsys.readouterr().err

    assert status == 2
    assert err.count("\n") == 1, "one line"
    assert err.startswith(f"asr-pipeline {command[0]}: error: ") and str(missing) in err


def test_an_unknown_flag_exits_2_as_argparse_does(capsys):
    assert main(["index", "--input", "x", "--output", "y", "--shard-count", "3"]) == 2
    assert "unrecognized arguments: --shard-count 3" in capsys.readouterr().err


def test_the_console_script_runs_a_subcommand_and_reports_usage_errors(tmp_path, shard_folder):
    output = tmp_path / "index.parquet"

    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "index", "--input", str(shard_folder), "--output", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    missing = subprocess.run(
        [str(CONSOLE_SCRIPT), "index", "--input", str(tmp_path / "nothing"), "--output", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == NUM_UTTERANCES
    assert missing.returncode == 2
    assert (
        missing.stderr
        == f"asr-pipeline index: error: --input {tmp_path / 'nothing'}: no such file or folder\n"
    )


def test_kedro_loads_the_project_cli_module_and_lists_every_stage():
    """Kedro imports asr_pipeline.cli for project commands; it must find its click group there."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {
        **os.environ,
        "KEDRO_DISABLE_TELEMETRY": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    result = subprocess.run(
        ["kedro", "registry", "list"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    stages = ("demo_corpus", "transcripts", "tokenizer", "features", "conditions", "index", "lm", "train")
    for stage in (*stages, "tune_decoding", "evaluate"):
        assert f"- {stage}" in result.stdout


def test_train_takes_raw_manifests_as_given_and_shard_folders_as_their_shards(
    tmp_path, audio_folder, shard_folder
):
    manifest = tmp_path / "train.jsonl"
    manifest.write_text(json.dumps({"audio_path": str(audio_folder / "utt00.wav"), "text": "a"}) + "\n")
    common = ["--epochs", 1, "--lr-warmup-steps", 0]

    raw, _ = train_config("--train-manifest", manifest, "--val-manifest", audio_folder, *common)
    shards, _ = train_config("--train-manifest", shard_folder, *common)

    assert raw.data.train_manifests == [str(manifest)] and raw.data.val_manifests == [str(audio_folder)]
    assert shards.data.train_manifests == [str(p) for p in sorted(shard_folder.glob("shard-*.parquet"))]


def test_waveform_flags_on_feature_shards_exit_2_saying_what_to_do(shard_folder, capsys):
    status = cli("train", "--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0,
                 "--waveform-noise-std", 0.01)  # fmt: skip
    err = capsys.readouterr().err

    assert status == 2
    assert "needs raw audio manifests" in err and "drop the waveform options" in err


def test_loader_and_sorting_switches_land_in_the_data_config(shard_folder):
    config, _ = train_config(
        "--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0, "--sort-by-length-desc",
        "--pin-memory", "--num-workers", 2, "--prefetch-factor", 4,
    )  # fmt: skip
    default, _ = train_config("--train-manifest", shard_folder, "--epochs", 1, "--lr-warmup-steps", 0)

    assert (config.data.sort_by_length_desc, config.data.pin_memory, config.data.prefetch_factor) == (
        True,
        True,
        4,
    )
    assert (default.data.sort_by_length_desc, default.data.pin_memory, default.data.prefetch_factor) == (
        False,
        None,
        None,
    )
