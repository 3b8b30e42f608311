"""A new architecture is this one module plus one ``registry.register`` call: a tiny CTC model is trained,
resumed and decoded through ``asr-pipeline train``, ``train --resume-from`` and ``decode`` with no other
edit. The torchrun worker, a process of its own, finds the architecture through
``ASR_PIPELINE_SPEC_MODULES`` (``<this module>:TOY``), as a user's own architecture would be found."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

from asr_pipeline.models import registry
from asr_pipeline.models.spec import ArchitectureSpec
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import PROJECT_ROOT
from tests.factories import NUM_BINS, char_tokenizer_model, write_corpus_shard


# --- the architecture: config, model, spec ------------------------------------------------------------
@dataclass(frozen=True)
class ToyCTCConfig:
    input_dim: int = 80
    vocab_size: int = 12
    d_model: int = 16
    dropout: float = 0.0


class ToyCTC(nn.Module):
    """(B, T, F) features -> (B, T, V) CTC log-probs at the frame rate: one hidden layer."""

    def __init__(self, config: ToyCTCConfig) -> None:
        super().__init__()
        self.hidden = nn.Linear(config.input_dim, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        hidden = self.dropout(torch.relu(self.hidden(features)))  # (B, T, D)
        return self.output(hidden).log_softmax(-1), lengths  # (B, T, V), (B,)


def toy_config(variant: str | None, values: Mapping[str, object]) -> ToyCTCConfig:
    sizes = {"tiny": {"d_model": 16}, "small": {"d_model": 32}}
    return ToyCTCConfig(**{**sizes[variant or "tiny"], **values})  # type: ignore[arg-type]


TOY = ArchitectureSpec(
    name="toy-ctc",
    config_class=f"{__name__}:ToyCTCConfig",
    variants=("tiny", "small"),
    config_for=toy_config,
    builder=f"{__name__}:ToyCTC",
    peak_learning_rate=lambda variant: 3e-3,
    frontend="fbank",
    input_dim=80,
    output="ctc",
    ctc_head="output",
    default_sizes="the tiny sizes",
)


@pytest.fixture
def toy(monkeypatch) -> Iterator[ArchitectureSpec]:
    """TOY registered here, and named to every process this test starts (found on PYTHONPATH)."""
    monkeypatch.setenv(registry.SPEC_MODULES_ENV, f"{__name__}:TOY")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    )
    registry.register(TOY)
    yield TOY
    registry.unregister(TOY.name)


# --- registration ---------------------------------------------------------------------------------------
def test_a_registered_architecture_is_checked_built_and_dropped_by_name(toy):
    from asr_pipeline.training.config import default_peak_learning_rate, resolve_config

    config = resolve_config({"data": {"train_manifests": ["x"]}}, {"model.architecture": "toy-ctc"})
    model = registry.build_model("toy-ctc", "small", input_dim=NUM_BINS, vocab_size=7)

    assert "toy-ctc" in registry.architecture_names() and "toy-ctc" in registry.REGISTERED_ARCHITECTURES
    assert config.data.input_dim == 80 and default_peak_learning_rate("toy-ctc", None) == 3e-3
    assert isinstance(model, ToyCTC) and model.output.out_features == 7 and model.hidden.out_features == 32
    with pytest.raises(ValueError, match=r"unknown toy-ctc variant 'huge'.*none for the tiny sizes"):
        registry.check_variant("toy-ctc", "huge")
    with pytest.raises(ValueError, match="is already registered"):
        registry.register(dataclasses.replace(TOY, variants=("other",)))

    registry.unregister("toy-ctc")
    with pytest.raises(ValueError, match="unknown architecture 'toy-ctc'; choose one of: squeezeformer"):
        registry.get_spec("toy-ctc")
    registry.register(TOY)


def test_another_process_finds_the_architecture_through_the_environment(toy):
    code = "from asr_pipeline.models.registry import get_spec; print(get_spec('toy-ctc').variants)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "('tiny', 'small')"


def test_a_spec_module_that_names_no_spec_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv(registry.SPEC_MODULES_ENV, f"{__name__}:toy_config")

    with pytest.raises(ValueError, match=f"ASR_PIPELINE_SPEC_MODULES: '{__name__}:toy_config' names no"):
        registry.get_spec("no-such-architecture")


# --- train, resume, decode through the CLI -------------------------------------------------------------
def run(*parts: object) -> str:
    """``asr-pipeline`` with these arguments, which must succeed; what it printed."""
    from asr_pipeline.cli import main  # not at the top: the torchrun worker imports this module for TOY

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main([str(part) for part in parts]) == 0, parts
    return stdout.getvalue()


# Two real torchrun trainings and a decode: 15 s on 2 shared cores, under the 20 s that would make it slow.
def test_the_new_architecture_trains_resumes_and_decodes_through_the_cli(toy, tmp_path):
    tokenizer = tmp_path / "tokenizer.model"
    tokenizer.write_bytes(char_tokenizer_model())
    shard = write_corpus_shard(tmp_path / "shard-00000.parquet", CTCTokenizer.from_file(tokenizer), 8, 1, "u")
    run_dir = tmp_path / "run"
    train = ["train", "--train-manifest", shard, "--tokenizer", tokenizer, "--output-dir", run_dir,
             "--architecture", "toy-ctc", "--input-dim", NUM_BINS, "--lr-warmup-steps", 1, "--log-every", 1]  # fmt: skip

    run(*train, "--epochs", 1)
    first = json.loads((run_dir / "checkpoint_latest.json").read_text())
    run(*train, "--epochs", 2, "--resume-from", run_dir)
    resumed = json.loads((run_dir / "checkpoint_latest.json").read_text())
    printed = run("decode", "--run-dir", run_dir, "--input", shard)
    decoded = json.loads(printed[printed.index("\n{") if not printed.startswith("{") else 0 :])

    saved = json.loads((run_dir / "training_config.json").read_text())
    assert saved["model"]["architecture"] == "toy-ctc"
    assert int(resumed["step"]) > int(first["step"]) > 0
    assert decoded["utterances"] == 8 and decoded["greedy"]["cer"] >= 0
