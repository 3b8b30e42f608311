"""publish.export: the exported folder holds everything a user needs, loads back to the same outputs wherever a
run dir is taken, and carries a model card written from the run (data, training, metrics, use, limits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from asr_pipeline.cli import main
from asr_pipeline.models.loading import is_export, load_run_model
from asr_pipeline.publish.export import CardInfo, export_run
from asr_pipeline.run_layout import TOKENIZER_FILE
from tests.conftest import make_wav
from tests.factories import NUM_BINS, untrained_run

EVALUATE = {"greedy": {"wer": 40.5, "cer": 12.25}, "lexicon": {"wer": 20.0, "cer": 8.5}, "utterances": 150}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("export")
    run_dir = untrained_run(root)
    metrics = root / "evaluate_test.json"
    metrics.write_text(json.dumps(EVALUATE))
    export_run(run_dir, root / "my-model", evaluate_metrics=[metrics], card=CardInfo(language="en"))
    return run_dir, root / "my-model"


def test_the_folder_holds_weights_tokenizer_configs_metrics_and_a_card(exported):
    run_dir, folder = exported

    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md", "config.json", "metrics.json", "model.safetensors", "tokenizer.model", "training_config.json",
    ]  # fmt: skip
    assert is_export(folder) and not is_export(run_dir)
    config = json.loads((folder / "config.json").read_text())
    assert config["architecture"] == "squeezeformer" and config["blank_id"] == 0
    assert config["frontend"] == {
        "kind": "fbank", "sample_rate": 16000, "feature_dim": NUM_BINS, "frame_shift_ms": 10.0,
        "fbank": {"num_mel_bins": NUM_BINS, "sample_rate": 16000, "frame_length_ms": 25.0, "frame_shift_ms": 10.0,
                  "dither": 0.0},
    }  # fmt: skip
    assert (folder / TOKENIZER_FILE).read_bytes() == (run_dir / TOKENIZER_FILE).read_bytes()
    assert json.loads((folder / "metrics.json").read_text())["evaluate"] == {"test": EVALUATE}


def test_loading_the_folder_back_gives_the_same_outputs_as_the_run(exported):
    run_dir, folder = exported
    features = torch.randn(2, 90, NUM_BINS)
    lengths = torch.tensor([90, 61])

    with torch.inference_mode():
        expected, expected_lengths = load_run_model(run_dir).model(features, lengths)
        actual, actual_lengths = load_run_model(folder).model(features, lengths)

    assert torch.equal(actual, expected) and torch.equal(actual_lengths, expected_lengths)


def test_transcribe_reads_the_exported_folder_as_it_reads_the_run(exported, tmp_path, capsys):
    run_dir, folder = exported
    audio = tmp_path / "tone.wav"
    audio.write_bytes(make_wav(seconds=2.0, freq=350.0))

    outputs = []
    for source in (run_dir, folder):
        assert main(["transcribe", str(audio), "--run-dir", str(source), "--output", "jsonl"]) == 0
        outputs.append(capsys.readouterr().out)

    assert outputs[0] == outputs[1] and json.loads(outputs[0])["duration_sec"] == 2.0


def test_the_model_card_is_written_from_the_run(exported):
    _, folder = exported
    card = (folder / "README.md").read_text()

    assert card.startswith(
        "---\nlibrary_name: asr_pipeline\npipeline_tag: automatic-speech-recognition\nlanguage: en\n"
    )
    for section in ("## Model", "## Training data", "## Training", "## Evaluation", "## Intended use",
                    "## Limitations", "## How to use"):  # fmt: skip
        assert f"\n{section}\n" in card, section
    params = json.loads((folder / "config.json").read_text())["parameters"]
    assert f"`squeezeformer`, {params:,} parameters" in card
    assert "| test | greedy | 40.50 | 12.25 |" in card and "| test | lexicon | 20.00 | 8.50 |" in card
    assert "shard-00000.parquet" in card  # the training data it names
    assert "demonstration model" not in card  # only a run on the demo corpus says so


def test_an_existing_folder_is_refused_unless_overwrite_and_a_run_without_tokenizer_is_an_error(
    exported, tmp_path
):
    run_dir, folder = exported
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        export_run(run_dir, folder)
    export_run(run_dir, folder, overwrite=True)
    assert not (folder.parent / f".{folder.name}.export-tmp").exists()

    bare = tmp_path / "bare"
    untrained_run(bare)
    (bare / "run" / TOKENIZER_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="the run's tokenizer must travel with its model"):
        export_run(bare / "run", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- --overwrite replaces an earlier export and nothing else -------------------------------------------------
def files_of(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return untrained_run(tmp_path / "source")


@pytest.mark.parametrize(
    ("output", "where"),
    [(".", "is"), ("export", "lies inside"), ("..", "holds")],
    ids=["the-run-dir", "inside-the-run-dir", "the-folder-holding-it"],
)
def test_an_output_that_is_inside_or_holds_the_run_dir_is_refused_even_with_overwrite(run_dir, output, where):
    before = files_of(run_dir)

    with pytest.raises(ValueError, match=f"{where} the run dir --run-dir {run_dir}: .* outside the run dir"):
        export_run(run_dir, run_dir / output, overwrite=True)
    assert files_of(run_dir) == before, "the run is intact"


def test_a_symlink_to_the_run_dir_is_the_run_dir(run_dir, tmp_path):
    (tmp_path / "link").symlink_to(run_dir)

    with pytest.raises(ValueError, match="is the run dir"):
        export_run(run_dir, tmp_path / "link", overwrite=True)
    assert (run_dir / "checkpoint_latest.json").is_file()


def test_overwrite_refuses_a_folder_that_is_not_an_earlier_export(run_dir, tmp_path):
    folder = tmp_path / "my-files"
    folder.mkdir()
    (folder / "thesis.tex").write_text("mine")

    with pytest.raises(FileExistsError, match=f"replaces only an earlier export .* {folder} is not one"):
        export_run(run_dir, folder, overwrite=True)
    assert files_of(folder) == {"thesis.tex": b"mine"}


def test_overwrite_refuses_an_earlier_export_holding_files_it_did_not_write(run_dir, tmp_path):
    folder = tmp_path / "model"
    export_run(run_dir, folder)
    (folder / "notes.md").write_text("mine")

    with pytest.raises(FileExistsError, match=r"holds files an export does not write \(notes.md\)"):
        export_run(run_dir, folder, overwrite=True)
    assert (folder / "notes.md").read_text() == "mine" and is_export(folder)
