"""Tiny factories for training tests: a character SentencePiece model and shards of random features whose
targets are that tokenizer's encoding of random words, so validation can score text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from asr_pipeline.text.tokenizer import CTCTokenizer
from asr_pipeline.training.hooks import TrainingHook
from tests.factories import NUM_BINS, char_tokenizer_model, write_corpus_shard


@pytest.fixture(scope="session")
def tokenizer_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.model"
    path.write_bytes(char_tokenizer_model())
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, tokenizer_path) -> dict[str, list[str]]:
    """16 training examples in 2 shards (9 + 7, so ranks see uneven shards) and 5 validation examples."""
    tokenizer = CTCTokenizer.from_file(tokenizer_path)
    root = tmp_path_factory.mktemp("shards")
    train = [
        write_corpus_shard(root / "train-00000.parquet", tokenizer, 9, seed=1, prefix="tr0"),
        write_corpus_shard(root / "train-00001.parquet", tokenizer, 7, seed=2, prefix="tr1"),
    ]
    val = [write_corpus_shard(root / "val-00000.parquet", tokenizer, 5, seed=3, prefix="va")]
    return {"train": [str(p) for p in train], "val": [str(p) for p in val]}


def tiny_config(corpus: dict[str, list[str]], tokenizer_path: Path, output_dir: Path, **run: Any) -> dict:
    """A config dict for the tiny model: ~4 adaptive batches per epoch."""
    return {
        "data": {
            "train_manifests": corpus["train"],
            "val_manifests": corpus["val"],
            "input_dim": NUM_BINS,
            "adaptive_batch_budget": 480,
            "adaptive_batch_max_samples": 8,
            "spec_time_mask_max_frames": 10,
            "spec_freq_mask_max_bins": 4,
        },
        "model": {"architecture": "squeezeformer", "variant": "tiny"},
        "optim": {"epochs": 2, "learning_rate": 1e-3, "lr_warmup_steps": 2},
        "run": {
            "output_dir": str(output_dir),
            "tokenizer": str(tokenizer_path),
            "log_every": 2,
            "seed": 3,
            "threads_per_rank": 1,
            **run,
        },
    }


@pytest.fixture
def keep_torch_threads():
    """An in-process run sets torch's thread count; give the rest of the session its own back."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def single_process(monkeypatch, keep_torch_threads):
    """An in-process run: no torchrun environment and no fault injection left over from the caller."""
    from asr_pipeline.training.worker import FAIL_RANK_ENV, FAIL_STEP_ENV

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", FAIL_RANK_ENV, FAIL_STEP_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_trainer(corpus, tokenizer_path, tmp_path, keep_torch_threads):
    """``make(precision="f32", hooks=None, architecture="squeezeformer", regularization=None, device="cpu",
    **optim)``: a single-process Trainer (CPU unless ``device`` is "cuda") of the architecture's tiny model on the tiny corpus, dropout off (deterministic forward passes), events not written, writing checkpoints to ``tmp_path/run``; ``hooks``
    replaces the ones the config asks for; keyword args override ``optim`` keys."""
    from asr_pipeline.training.config import resolve_config
    from asr_pipeline.training.distributed import DistributedContext
    from asr_pipeline.training.events import EventLog
    from asr_pipeline.training.loaders import build_data
    from asr_pipeline.training.trainer import Trainer

    def make(
        precision: str = "f32",
        hooks: list | None = None,
        architecture: str = "squeezeformer",
        regularization: dict | None = None,
        device: str = "cpu",
        **optim: Any,
    ) -> Trainer:
        # On CUDA without DVCLive: the GPU machines may lack dvc(live), as test_precision's CUDA runs say.
        gpu = {"backend": "cuda", "dvclive": False} if device == "cuda" else {}
        config_dict = tiny_config(corpus, tokenizer_path, tmp_path / "run", precision=precision, **gpu)
        config_dict["model"] = {"architecture": architecture, "variant": "tiny", "dropout": 0.0}
        config_dict["regularization"] = regularization or {}
        config_dict["optim"] |= optim
        config = resolve_config(config_dict)
        ctx = DistributedContext(rank=0, local_rank=0, world_size=1, device=torch.device(device))
        vocab_size = CTCTokenizer.from_file(tokenizer_path).vocab_size
        events = EventLog(tmp_path / "events.jsonl", enabled=False, append=False)
        return Trainer(config, ctx, build_data(config, ctx), vocab_size, events, hooks=hooks)

    return make


# --- a hook that records the Trainer's calls ---
class RecordingHook(TrainingHook):
    """Notes every point it is called at; keeps a counter as its checkpoint state."""

    state_key = "recording"

    def __init__(self, calls: list[tuple[Any, ...]]) -> None:
        self.calls = calls
        self.epochs_ended = 0

    def on_weights_loaded(self, trainer, base_report):
        self.calls.append(("weights_loaded",))

    def on_model(self, trainer):
        self.calls.append(("model",))

    def on_train_mode(self, trainer):
        self.calls.append(("train_mode",))

    def on_epoch_start(self, trainer, epoch):
        self.calls.append(("epoch_start", epoch))

    def on_epoch_end(self, trainer, epoch):
        self.epochs_ended += 1
        self.calls.append(("epoch_end", epoch, trainer.latest_scores is not None))

    def state_dict(self, trainer):
        return {"epochs_ended": self.epochs_ended}

    def load_state_dict(self, trainer, state):
        self.calls.append(("load_state", state))

    def on_close(self, trainer):
        self.calls.append(("close",))


def events(run_dir: Path, kind: str | None = None) -> list[dict]:
    """The run's ``events.jsonl`` entries, of one ``kind`` when given (``training.events.read_events``)."""
    from asr_pipeline.training.events import read_events

    return read_events(run_dir, kind)


def run_in_process(config_dict: dict) -> dict:
    """Train one rank in this process (with ``single_process``) and return its final metrics."""
    from asr_pipeline.training.config import resolve_config
    from asr_pipeline.training.worker import setup_distributed, train

    config = resolve_config(config_dict)
    return train(config, setup_distributed(config))


# --- each architecture's tiny model (layer drop, growth) ---
ENCODER_ARCHITECTURES = ["squeezeformer", "zipformer", "w2v-bert", "paraformer"]


def architecture_model(architecture: str) -> torch.nn.Module:
    """``architecture``'s tiny model, dropout off, seeded."""
    from asr_pipeline.training.checkpoint import build_model_from_config
    from asr_pipeline.training.config import DataConfig, ModelConfig, TrainConfig

    config = TrainConfig(
        data=DataConfig(train_manifests=[]),
        model=ModelConfig(architecture=architecture, variant="tiny", dropout=0.0),
    )
    torch.manual_seed(0)
    model, _ = build_model_from_config(config, 11)
    return model


def encoder_output(model, architecture: str, features, lengths) -> torch.Tensor:
    if architecture == "paraformer":  # the encoder is what layer drop changes
        return model.encode(features, lengths)[0]
    return model(features, lengths)[0]


def encoder_inputs(architecture: str) -> tuple[torch.Tensor, torch.Tensor]:
    from asr_pipeline.models.w2v_bert import w2v_bert_config

    dim = w2v_bert_config("tiny").input_dim if architecture == "w2v-bert" else 80
    generator = torch.Generator().manual_seed(1)
    return torch.randn(2, 64, dim, generator=generator), torch.tensor([64, 48])
