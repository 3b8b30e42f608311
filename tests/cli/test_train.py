"""cli.train: ``asr-pipeline train`` flags of the training engine: the reference trainer's names and defaults
in --help (the docs pages generated from them: tests/cli/test_docs.py), aliases and conflicting switches,
precision and device flags, the torchrun options, and the vocabulary inferred from --tokenizer. Nothing here
starts torchrun."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from asr_pipeline.cli import build_parser, main, train_config_from_args
from asr_pipeline.cli.docs import flag_rows, train_parser
from asr_pipeline.cli.train import architecture_option_flags
from asr_pipeline.models.registry import register, unregister
from asr_pipeline.models.spec import ArchitectureSpec
from asr_pipeline.options import setting, walk
from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.config import save_json


def train_config(shard: Path, *parts: object) -> Any:
    """The config ``asr-pipeline train --train-manifest <shard> <parts>`` would save (no torchrun)."""
    args = build_parser().parse_args(["train", "--train-manifest", str(shard), *map(str, parts)])
    return train_config_from_args(args)[0]


def cli(*parts: object) -> int:
    return main([str(part) for part in parts])


# --- the reference flags, their defaults and the docs page ------------------------------------------------
# (flag, the default --help states, or None for an option without one). Names and defaults are the
# reference Rust trainer's, except --output-dir (runs/asr: this project's) and the torchrun options.
REFERENCE_FLAGS = [
    ("--architecture", "squeezeformer"),
    ("--zipformer", "off"),
    ("--paraformer", "off"),
    ("--w2v-bert", "off"),
    ("--variant", "unset"),
    ("--blank-id", "0"),
    ("--d-model", "256"),
    ("--num-layers", "16"),
    ("--num-heads", "4"),
    ("--vocab-size", "inferred from --tokenizer"),
    ("--epochs", "500"),
    ("--learning-rate", "per architecture: squeezeformer min(variant peak, 3e-4), 3e-4 without --variant; "
     "zipformer and paraformer 1e-3; w2v-bert 1e-4"),
    ("--weight-decay", "0.0005"),
    ("--lr-warmup-epochs", "20"),
    ("--warmup-epochs", "20"),
    ("--lr-hold-epochs", "160"),
    ("--hold-epochs", "160"),
    ("--lr-decay-exponent", "1.0"),
    ("--decay-exponent", "1.0"),
    ("--lr-warmup-steps", "unset"),
    ("--lr-hold-steps", "unset"),
    ("--lr-decay-steps", None),
    ("--lr-min", "0.0"),
    ("--gradient-accumulation-steps", "1"),
    ("--gradient-clip-norm", None),
    ("--gradient-clip-value", None),
    ("--ema-decay", None),
    ("--ema-start-step", "0"),
    ("--backend", "cpu"),
    ("--device-index", "0"),
    ("--device-indices", "unset"),
    ("--precision", "f32"),
    ("--kernels", "auto"),
    ("--mixed-precision", "off"),
    ("--output-dir", "runs/asr"),
    ("--init-from", "unset"),
    ("--resume-from", "unset"),
    ("--log-every", "10"),
    ("--dry-run", "off"),
    ("--seed", "0"),
    ("--tokenizer", "unset"),
    ("--val-manifest", None),
    ("--validation-manifest", None),
    ("--valid-manifest", None),
    ("--validation-set", None),
    ("--val-set", None),
    ("--nproc-per-node", None),
    ("--nnodes", "1"),
    ("--node-rank", "0"),
    ("--rdzv-endpoint", "unset"),
    ("--rdzv-id", "asr-pipeline"),
    ("--rdzv-backend", "c10d"),
]  # fmt: skip


@pytest.fixture(scope="module")
def help_text() -> str:
    return train_parser().format_help()


@pytest.fixture(scope="module")
def documented_defaults() -> dict[str, str]:
    """Each option name -> the default the docs flags page states for it."""
    return {
        name.strip("`"): default
        for names, default, _ in flag_rows(train_parser())
        for name in names.split(", ")
    }


@pytest.mark.parametrize(("flag", "default"), REFERENCE_FLAGS, ids=[flag for flag, _ in REFERENCE_FLAGS])
def test_every_reference_flag_is_in_help_with_its_stated_default(
    flag, default, help_text, documented_defaults
):
    assert f"{flag} " in help_text or f"{flag}\n" in help_text or f"{flag}," in help_text
    if default is not None:
        assert documented_defaults[flag].startswith(default), documented_defaults[flag]


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("model.architecture", "squeezeformer"),
        ("model.variant", None),
        ("model.blank_id", 0),
        ("optim.epochs", 500),
        ("optim.learning_rate", None),  # the recipe: training.config.default_peak_learning_rate
        ("optim.weight_decay", 5e-4),
        ("optim.lr_warmup_epochs", 20),
        ("optim.lr_hold_epochs", 160),
        ("optim.lr_decay_exponent", 1.0),
        ("optim.lr_warmup_steps", None),
        ("optim.lr_min", 0.0),
        ("optim.gradient_accumulation_steps", 1),
        ("optim.ema_start_step", 0),
        ("run.output_dir", "runs/asr"),
        ("run.backend", "cpu"),
        ("run.device_index", 0),
        ("run.device_indices", []),
        ("run.precision", "f32"),
        ("run.kernels", "auto"),
        ("run.log_every", 10),
        ("run.seed", 0),
        ("run.dry_run", False),
    ],
)
def test_without_flags_the_resolved_config_holds_the_reference_defaults(shard, field, expected):
    section, name = field.split(".")

    assert getattr(getattr(train_config(shard), section), name) == expected


# --- aliases and switches ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "field"),
    [
        ("--warmup-epochs", "lr_warmup_epochs"),
        ("--hold-epochs", "lr_hold_epochs"),
        ("--decay-exponent", "lr_decay_exponent"),
    ],
)
def test_the_short_schedule_aliases_set_the_same_field(shard, flag, field):
    assert getattr(train_config(shard, flag, 3).optim, field) == 3


def test_any_step_flag_switches_to_the_step_schedule(shard):
    assert not train_config(shard).optim.uses_step_schedule
    assert train_config(shard, "--lr-decay-steps", 50).optim.uses_step_schedule


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--paraformer", "--variant", "xs"],
            "unknown paraformer variant 'xs'; choose one of: base, tiny, demo",
        ),
        (["--architecture", "squeezeformer", "--paraformer"], "--architecture and --paraformer both set"),
        (["--zipformer", "--w2v-bert"], "--zipformer and --w2v-bert both set model.architecture"),
    ],
)
def test_unavailable_or_conflicting_architectures_exit_2_before_anything_runs(
    shard, tmp_path, capsys, flags, message
):
    status = cli("train", "--train-manifest", shard, "--output-dir", tmp_path / "run", *flags)
    err = capsys.readouterr().err

    assert status == 2
    assert err.startswith("asr-pipeline train: error: ") and message in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flags", "precision"),
    [
        (["--mixed-precision"], "f16"),
        (["--mixed-precision", "--precision", "bf16"], "bf16"),  # --precision wins over the shortcut
        (["--precision", "f32", "--mixed-precision"], "f32"),
    ],
)
def test_mixed_precision_means_f16_unless_precision_is_given(shard, flags, precision):
    assert train_config(shard, *flags).run.precision == precision


def test_paraformer_flags_reach_the_model_options(shard):
    config = train_config(
        shard, "--paraformer", "--paraformer-alignment-mode", "viterbi", "--paraformer-enhanced"
    )
    assert config.model.architecture == "paraformer"
    assert config.model.options == {"alignment_mode": "viterbi", "enhanced": True}


def test_kernels_flag_reaches_the_run_section(shard):
    assert train_config(shard, "--kernels", "reference").run.kernels == "reference"


def test_mixed_precision_overrides_a_config_files_precision(shard, tmp_path):
    config_file = tmp_path / "training_config.json"
    save_json(train_config(shard, "--precision", "bf16"), config_file)

    args = build_parser().parse_args(["train", "--config", str(config_file), "--mixed-precision"])
    assert train_config_from_args(args)[0].run.precision == "f16"


def test_device_indices_are_comma_separated_and_a_bad_list_is_a_usage_error(shard, capsys):
    assert train_config(shard, "--backend", "cuda", "--device-indices", "2,0").run.device_indices == [2, 0]

    assert cli("train", "--train-manifest", shard, "--device-indices", "0,x") == 2
    assert "expected comma-separated int values, got '0,x'" in capsys.readouterr().err


# --- devices and torchrun ----------------------------------------------------------------------------------
@pytest.fixture
def launched(monkeypatch) -> dict[str, Any]:
    """Replaces run_training: records what it was called with and returns no metrics."""
    from asr_pipeline.training import launch

    seen: dict[str, Any] = {}

    def fake_run_training(config, **options):
        seen.update(config=config, **options)
        return {}

    monkeypatch.setattr(launch, "run_training", fake_run_training)
    return seen


def test_the_rendezvous_flags_reach_torchrun(shard, tmp_path, launched, capsys):
    status = cli(
        "train", "--train-manifest", shard, "--output-dir", tmp_path / "run", "--nnodes", 2,
        "--node-rank", 1, "--rdzv-endpoint", "host0:29400", "--rdzv-id", "job-3", "--nproc-per-node", 2,
        "--vocab-size", 12, "--input-dim", 16,
    )  # fmt: skip

    assert status == 0
    assert {key: launched[key] for key in ("nproc_per_node", "nnodes", "node_rank", "rdzv_endpoint")} == {
        "nproc_per_node": 2,
        "nnodes": 2,
        "node_rank": 1,
        "rdzv_endpoint": "host0:29400",
    }
    assert (launched["rdzv_id"], launched["rdzv_backend"]) == ("job-3", "c10d")
    assert json.loads(capsys.readouterr().out)["run_dir"] == str(tmp_path / "run")


def test_device_indices_choose_the_process_count_and_a_different_count_is_a_usage_error(
    shard, tmp_path, launched, monkeypatch, capsys
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    common = ["train", "--train-manifest", shard, "--output-dir", tmp_path / "run", "--backend", "cuda"]
    common += ["--input-dim", "16"]
    common += ["--vocab-size", 12]

    assert cli(*common, "--device-indices", "1,3") == 0
    assert launched["nproc_per_node"] == 2 and launched["config"].run.device_indices == [1, 3]
    capsys.readouterr()

    assert cli(*common, "--device-indices", "1,3", "--nproc-per-node", 3) == 2
    assert "nproc_per_node=3 but device_indices=[1, 3] lists 2 GPU(s)" in capsys.readouterr().err


def test_backend_cuda_without_cuda_is_refused_before_torchrun_and_before_writing(
    shard, tmp_path, launched, monkeypatch, capsys
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    status = cli("train", "--train-manifest", shard, "--output-dir", tmp_path / "run", "--backend", "cuda")
    err = capsys.readouterr().err

    assert status == 1 and "no CUDA device is usable here" in err and "--backend cpu" in err
    assert launched == {}, "torchrun was never started"
    assert not (tmp_path / "run").exists()


# --- the vocabulary --------------------------------------------------------------------------------------
def test_without_vocab_size_the_tokenizer_sets_it(shard, tokenizer, tmp_path):
    from asr_pipeline.training.loop import vocab_size_of

    config = train_config(shard, "--tokenizer", tokenizer, "--output-dir", tmp_path / "run")
    ctc = CTCTokenizer.from_file(tokenizer)

    assert config.model.vocab_size is None
    assert vocab_size_of(config, ctc) == ctc.vocab_size == ctc.num_pieces + 1  # pieces + blank
    mismatched = train_config(shard, "--tokenizer", tokenizer, "--vocab-size", ctc.vocab_size + 5)
    with pytest.raises(ValueError, match=rf"model.vocab_size={ctc.vocab_size + 5} but the tokenizer .* has"):
        vocab_size_of(mismatched, ctc)


def test_without_vocab_size_or_tokenizer_the_run_names_both_ways_to_fix_it(shard):
    from asr_pipeline.training.loop import vocab_size_of

    with pytest.raises(
        ValueError, match=r"pass --tokenizer MODEL .* or --vocab-size N \(model\.vocab_size\)"
    ):
        vocab_size_of(train_config(shard), None)


# --- refused before torchrun: one line naming the flag, exit 2 ----------------------------------------------
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            [],
            "asr-pipeline train: error: the model's output size is unknown: pass --tokenizer MODEL (its pieces "
            "+ 1 blank; run.tokenizer) or --vocab-size N (model.vocab_size)",
        ),
        (
            ["--tokenizer", "{tokenizer}", "--variant", "XXL"],
            "asr-pipeline train: error: --variant: unknown squeezeformer variant 'XXL'; choose one of: xs, s, "
            "sm, m, ml, l, tiny, demo (or none for d_model 256, 16 layers, 4 heads)",
        ),
        (
            ["--tokenizer", "{tokenizer}", "--resume-from", "{tmp}/never-trained"],
            "asr-pipeline train: error: run.resume_from (--resume-from) '{tmp}/never-trained': {tmp}/never-trained "
            "holds no finished checkpoint (checkpoint_latest.json); pass a run dir that does, its "
            "checkpoint_latest/ folder or its checkpoint_latest.json",
        ),
        (
            ["--tokenizer", "{tokenizer}", "--init-from", "{tmp}/weights.safetensors"],
            "asr-pipeline train: error: run.init_from (--init-from) '{tmp}/weights.safetensors': no such file",
        ),
    ],
    ids=["no-vocabulary", "unknown-variant", "resume-without-checkpoint", "init-from-missing-file"],
)
def test_a_config_the_workers_would_fail_on_exits_2_with_one_line_before_torchrun(
    shard, tokenizer, tmp_path, monkeypatch, capsys, flags, message
):
    from asr_pipeline.training import launch

    monkeypatch.setattr(launch, "launch_training", lambda *a, **k: pytest.fail("torchrun must not start"))
    paths = {"tokenizer": tokenizer, "tmp": tmp_path}

    status = cli(
        "train",
        "--train-manifest",
        shard,
        "--output-dir",
        tmp_path / "run",
        *(str(f).format(**paths) for f in flags),
    )
    err = capsys.readouterr().err

    assert status == 2
    assert err == message.format(**paths) + "\n", "one line, no traceback"
    assert not (tmp_path / "run").exists()


def test_model_options_take_json_or_plain_string_values_and_reach_the_model(shard, tmp_path):
    config = train_config(
        shard,
        "--model-option", "conv_kernel_size=15",
        "--model-option", "conv_use_glu=true",
        "--model-option", "input_normalization=utterance",
    )  # fmt: skip

    assert config.model.options == {
        "conv_kernel_size": 15,
        "conv_use_glu": True,
        "input_normalization": "utterance",
    }
    from asr_pipeline.models.loading import build_model_for

    model, resolved = build_model_for(config.model, input_dim=16, vocab_size=13)
    assert resolved["conv_kernel_size"] == 15 and resolved["conv_use_glu"] is True
    assert model.blocks[0].conv.module.depthwise.kernel_size == (15,)


def test_model_options_given_as_flags_override_a_config_files_options_field_by_field(shard, tmp_path):
    saved = train_config(shard, "--model-option", "conv_kernel_size=15", "--model-option", "ff_expansion=2")
    save_json(saved, tmp_path / "training_config.json")

    config = train_config(
        shard, "--config", tmp_path / "training_config.json", "--model-option", "ff_expansion=3"
    )

    assert config.model.options == {"conv_kernel_size": 15, "ff_expansion": 3}


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("bogus=1", "unknown squeezeformer option(s) bogus; model.options accepts: ff_expansion"),
        ("novalue", "--model-option 'novalue': expected NAME=VALUE"),
    ],
)
def test_a_bad_model_option_exits_2_naming_what_is_accepted(shard, tmp_path, capsys, option, message):
    status = cli(
        "train", "--train-manifest", shard, "--output-dir", tmp_path / "run", "--model-option", option
    )

    assert status == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_architecture_flags_reach_the_model_section(shard, tmp_path):
    zipformer = train_config(shard, "--zipformer", "--variant", "tiny", "--swoosh", "sigmoid")
    assert (zipformer.model.architecture, zipformer.model.options) == ("zipformer", {"swoosh": "sigmoid"})
    assert zipformer.data.input_dim == 80, "fbank width: the zipformer frontend's"
    constrained = train_config(shard, "--zipformer", "--variant", "tiny", "--activation-constraints")
    assert constrained.model.options == {"activation_constraints": True}

    hf_dir = tmp_path / "hf"
    w2v = train_config(
        shard,
        "--w2v-bert",
        "--w2v-hf-model-dir",
        hf_dir,
        "--w2v-hf-load-weights",
        "--w2v-activation-checkpointing",
    )
    assert (w2v.model.pretrained_dir, w2v.model.load_pretrained_weights) == (str(hf_dir), True)
    assert w2v.model.options == {"activation_checkpointing": True}
    assert w2v.data.input_dim == 160, "the w2v-bert frontend's stacked width"


def test_every_architecture_option_flag_is_generated_from_its_config_field(documented_defaults):
    from asr_pipeline.cli.train import MODEL_OPTION_FLAGS
    from asr_pipeline.models.registry import SPECS
    from asr_pipeline.models.zipformer_spec import ZipformerConfig

    with_flags = {
        field.flag: f"model.options.{field.key}"
        for spec in SPECS.values()
        for field in walk(spec.config_type)
        if field.flag
    }
    assert {flag.flag: flag.key for flag in MODEL_OPTION_FLAGS} == with_flags
    assert {
        "--swoosh", "--activation-constraints", "--paraformer-alignment-mode", "--paraformer-enhanced"
    } < set(with_flags)  # fmt: skip
    assert documented_defaults["--swoosh"] == ZipformerConfig.swoosh == "paper"
    assert documented_defaults["--activation-constraints"] == "off"
    assert ZipformerConfig.activation_constraints is False
    assert documented_defaults["--w2v-activation-checkpointing"] == "off"


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    input_dim: int = 80
    vocab_size: int = 10
    dropout: float = 0.1
    depth: int = setting(2, help="blocks in the toy", flag="--toy-depth")
    layers: int = 2


def toy_spec(name: str, config_class: type) -> ArchitectureSpec:
    return ArchitectureSpec(
        name=name,
        config_class=config_class,
        variants=(),
        config_for=lambda variant, values: config_class(**values),
        builder="toy:build",
        peak_learning_rate=lambda variant: 1e-3,
        frontend="fbank",
        input_dim=80,
        output="ctc",
    )


def test_a_registered_architectures_flagged_field_becomes_a_flag_naming_it():
    register(toy_spec("toy-flags", ToyConfig))
    try:
        flags = {flag.flag: flag for flag in architecture_option_flags()}
    finally:
        unregister("toy-flags")

    assert flags["--toy-depth"].key == "model.options.depth"
    assert flags["--toy-depth"].help == "toy-flags: blocks in the toy"


def test_two_architectures_giving_one_flag_to_different_fields_is_refused():
    @dataclasses.dataclass(frozen=True)
    class OtherToyConfig(ToyConfig):
        layers: int = setting(2, help="layers of the other toy", flag="--toy-depth")

    register(toy_spec("toy-a", ToyConfig))
    register(toy_spec("toy-b", OtherToyConfig))
    try:
        with pytest.raises(
            ValueError,
            match=r"--toy-depth sets model\.options\.depth of toy-a but model\.options\.layers of toy-b",
        ):
            architecture_option_flags()
    finally:
        unregister("toy-a")
        unregister("toy-b")


def test_a_w2v_bert_option_on_squeezeformer_is_refused_naming_the_valid_ones(shard, tmp_path, capsys):
    status = cli("train", "--train-manifest", shard, "--output-dir", tmp_path / "run", "--swoosh", "paper")

    assert status != 0
    assert "unknown squeezeformer option(s) swoosh" in capsys.readouterr().err


def test_shards_of_another_width_than_the_architecture_exit_2_before_torchrun(shard, tmp_path, capsys):
    status = cli(
        "train", "--train-manifest", shard, "--output-dir", tmp_path / "run", "--w2v-bert", "--vocab-size", 9
    )
    err = capsys.readouterr().err

    assert status == 2
    assert (
        "shard-00000.parquet holds 16-dim features, but the w2v-bert model is built for data.input_dim=160"
        in err
    )
    assert not (tmp_path / "run").exists()


# --- whose defaults, and --set ----------------------------------------------------------------------------
# The reference trainer's defaults where they differ from ours (docs/reference/defaults.md), as the reference
# states them: key -> value. --defaults reference must give exactly these and change nothing else.
REFERENCE_DEFAULTS = {
    "data.spec_time_masks": 0,
    "data.spec_freq_masks": 0,
    "data.waveform_noise_kind": "uniform",
    "data.max_audio_duration_filters_validation": True,
    "optim.gradient_clip_norm": None,
    "optim.lr_decay_kind": "inverse",
    "validation.decoding.beam_width": 1,
}


def flat(config: Any) -> dict[str, Any]:
    from asr_pipeline.options import to_dict

    def walk(values: dict, prefix: str) -> dict[str, Any]:
        out = {}
        for key, value in values.items():
            if isinstance(value, dict) and key != "options":
                out |= walk(value, f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value
        return out

    return walk(to_dict(config), "")


def test_defaults_reference_gives_the_reference_trainers_defaults_and_changes_nothing_else(shard):
    ours = flat(train_config(shard))
    reference = flat(train_config(shard, "--defaults", "reference"))

    changed = {key: reference[key] for key in reference if reference[key] != ours[key]}
    assert changed == REFERENCE_DEFAULTS
    assert all(ours[key] != value for key, value in REFERENCE_DEFAULTS.items()), "each row is a difference"


def test_a_flag_given_wins_over_the_reference_defaults(shard):
    config = train_config(shard, "--defaults", "reference", "--spec-time-masks", "3")

    assert (config.data.spec_time_masks, config.data.spec_freq_masks) == (3, 0)


def test_the_reference_defaults_set_an_architectures_reference_options(shard):
    paraformer = train_config(shard, "--paraformer", "--variant", "tiny", "--defaults", "reference")

    assert paraformer.model.options == {"alignment_mode": "viterbi"}
    assert train_config(shard, "--paraformer", "--variant", "tiny").model.options == {}


def test_set_reaches_a_field_without_a_flag_and_wins_over_the_flags(shard):
    config = train_config(
        shard,
        "--set",
        "validation.decoding.beam_threshold=12.5",
        "--set",
        "optim.newbob.decay=0.7",
        "--epochs",
        "3",
        "--set",
        "optim.epochs=4",
    )

    assert config.validation.decoding.beam_threshold == 12.5
    assert config.optim.newbob.decay == 0.7
    assert config.optim.epochs == 4


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("optim.epoch=3", r"unknown training config keys: optim\.epoch \(the optim section accepts: epochs,"),
        ("optim.epochs=three", r"optim\.epochs: expected int, got 'three'"),
    ],
)
def test_set_with_an_unknown_key_or_a_wrong_type_names_the_key(shard, assignment, message):
    with pytest.raises(ValueError, match=message):
        train_config(shard, "--set", assignment)


def test_set_without_an_equals_sign_is_a_usage_error(shard, capsys):
    assert cli("train", "--train-manifest", shard, "--set", "optim.epochs") == 2
    assert "expected KEY=VALUE such as optim.epochs=3" in capsys.readouterr().err


def test_every_flag_of_a_config_field_is_generated_from_the_field():
    from asr_pipeline.cli.train import CONFIG_FLAGS
    from asr_pipeline.training.config import TrainConfig

    with_flags = {field.key: field.flag for field in walk(TrainConfig) if field.flag}
    assert {flag.key: flag.flag for flag in CONFIG_FLAGS} == with_flags
    help_text = train_parser().format_help()
    assert all(flag in help_text for flag in with_flags.values())
