"""File names inside a run directory, shared by the worker, the Kedro train node, the CLI and
``models.loading`` (which rebuilds a run's model), and the one way to turn what a user points at
(``--resume-from``, ``--init-from``, ``decode --run-dir``) into a run dir.

It sits below every layer (``models/`` reads run dirs, ``training/`` writes them), so it stays free of
heavy imports: ``asr-pipeline --help`` and the Kedro node can name these cheaply.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from asr_pipeline.options import ConfigError  # torch-free, as this module must stay

CONFIG_FILE = "training_config.json"  # the resolved TrainConfig, written before training starts
METRICS_FILE = "metrics.json"  # final metrics, written last by rank 0
TOKENIZER_FILE = "tokenizer.model"  # the SentencePiece model the run was trained with
INDEX_FILE = "length_index.parquet"  # the length index the run batched with
CHECKPOINT_DIR = "checkpoint_latest"  # the latest checkpoint's folder (training.checkpoint)
CHECKPOINT_POINTER = "checkpoint_latest.json"  # written last: the checkpoint's commit point
WEIGHTS_FILE = "model.safetensors"  # a checkpoint folder's weights of the unwrapped model
EMA_FILE = "ema.safetensors"  # beside them with optim.ema_decay: the weights' moving average (training.ema)
AVERAGE_FILE = "averaged.safetensors"  # with optim.use_averaged_model: icefall's running average (float64)
BEST_DIR = "checkpoint_best"  # the weights of the best validation score so far (training.run_checkpoints)
BEST_POINTER = "checkpoint_best.json"  # its step, epoch, model_config and metrics, written last
KEPT_DIR = "checkpoints"  # run.keep_checkpoints: every checkpoint's weights, step-<step>.safetensors
AVERAGED_KEPT_DIR = (
    "averaged"  # under KEPT_DIR: the running averages kept with them (optim.use_averaged_model)
)
LOCK_FILE = ".run.lock"  # held (flock) by the run writing the dir, holding its pid (training.run_dir)
# An exported model folder (publish.export): config.json (this format's name in "format"), WEIGHTS_FILE,
# TOKENIZER_FILE, CONFIG_FILE, METRICS_FILE and a README.md model card; it loads wherever a run dir does.
EXPORT_CONFIG = "config.json"
EXPORT_FORMAT = "asr_pipeline-export"
CARD_FILE = "README.md"  # an export's model card (publish.export, hf_finetune.export): the Hub shows it


# Which weights of a checkpoint a command loads: decode, transcribe, export and serve (--weights), the
# tune_decoding and evaluate stages (params.yaml decoding.weights); ``parse_weights`` reads the choice,
# ``models.loading.checkpoint_state`` loads it.
WEIGHTS = {"raw": WEIGHTS_FILE, "averaged": AVERAGE_FILE, "ema": EMA_FILE}
DEFAULT_WEIGHTS = "raw"
WEIGHTS_HELP = (
    f"which weights of the checkpoint to load: raw ({WEIGHTS_FILE}, what validation scored), averaged "
    f"({AVERAGE_FILE}: icefall's --use-averaged-model, the mean of the weights over the run so far; needs "
    f"optim.use_averaged_model), averaged:STEP (the mean over the steps after the kept checkpoint STEP, "
    f"icefall's --epoch E --avg N; needs run.keep_checkpoints too) or ema ({EMA_FILE}: the moving average; "
    f"needs optim.ema_decay)"
)
_KEPT_WITH = {"averaged": "optim.use_averaged_model", "ema": "optim.ema_decay"}
_AVERAGED_FROM = re.compile(r"^averaged:(\d+)$")


def parse_weights(weights: str, option: str) -> tuple[str, int | None]:
    """``weights`` as (a ``WEIGHTS`` name, the kept step its average starts after, or None): "averaged:400"
    is ("averaged", 400). Anything else is a one-line ``ConfigError`` naming ``option``."""
    match = _AVERAGED_FROM.match(weights)
    if match is not None:
        return "averaged", int(match.group(1))
    if weights not in WEIGHTS:
        raise ConfigError(
            f"{option}: unknown weights {weights!r}; choose one of {', '.join(WEIGHTS)} or averaged:STEP"
        )
    return weights, None


def check_weights(weights: str, option: str) -> None:
    """A one-line ``ConfigError`` naming ``option`` unless ``weights`` is one ``parse_weights`` reads."""
    parse_weights(weights, option)


def checkpoint_weights(folder: str | Path, weights: str, option: str) -> Path:
    """The file of the checkpoint ``folder`` that ``weights`` (a ``WEIGHTS`` name) stands for. An unknown
    name or a missing file is a one-line ``ConfigError`` naming the file and ``option``, the flag or params
    key that chose it ("--weights", "params.yaml decoding.weights")."""
    if weights not in WEIGHTS:  # averaged:STEP reads the kept averages (models.averaging), not one file
        parse_weights(weights, option)
        raise ValueError(f"{weights!r} names no single file of a checkpoint folder")
    path = Path(folder) / WEIGHTS[weights]
    if path.is_file():
        return path
    if weights == DEFAULT_WEIGHTS:
        raise ConfigError(f"{option} {weights}: {path} does not exist: {folder} holds no finished checkpoint")
    raise ConfigError(
        f"{option} {weights}: {path} does not exist (the run was trained without {_KEPT_WITH[weights]}); "
        f"set {option} {DEFAULT_WEIGHTS}, or train with {_KEPT_WITH[weights]}"
    )


def kept_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's kept checkpoint weights (``run.keep_checkpoints``), oldest step first."""
    return sorted((Path(run_dir) / KEPT_DIR).glob("step-*.safetensors"))


def resolve_run_dir(path: str | Path) -> Path:
    """The run dir ``path`` stands for: the run dir itself, its ``checkpoint_latest/`` folder, or its
    ``checkpoint_latest.json`` pointer (the reference trainer documents ``--resume-from
    runs/x/checkpoint_latest``). Other paths come back unchanged; nothing is read."""
    path = Path(path)
    return path.parent if path.name in (CHECKPOINT_DIR, CHECKPOINT_POINTER) else path


def require_checkpoint(path: str | Path, what: str) -> Path:
    """``resolve_run_dir(path)``, checked to hold a finished checkpoint; ``what`` names the option in the
    FileNotFoundError (e.g. "run.resume_from (--resume-from)")."""
    run_dir = resolve_run_dir(path)
    if not (run_dir / CHECKPOINT_POINTER).is_file():
        raise FileNotFoundError(
            f"{what} {str(path)!r}: {run_dir} holds no finished checkpoint ({CHECKPOINT_POINTER}); pass a "
            f"run dir that does, its {CHECKPOINT_DIR}/ folder or its {CHECKPOINT_POINTER}"
        )
    return run_dir


def run_tokenizer(run_dir: str | Path) -> Path:
    """The SentencePiece model a run (or an exported folder) was trained with: its own copy
    (``TOKENIZER_FILE``), else the file its config names (``run.tokenizer``). decode, transcribe, export and
    serve all find it here."""
    run_dir = Path(run_dir)
    if (run_dir / TOKENIZER_FILE).is_file():
        return run_dir / TOKENIZER_FILE
    config = run_dir / CONFIG_FILE
    named = json.loads(config.read_text()).get("run", {}).get("tokenizer") if config.is_file() else None
    if named and Path(named).is_file():
        return Path(named)
    raise FileNotFoundError(
        f"{run_dir / TOKENIZER_FILE} does not exist and the run's config names no tokenizer file that does "
        f"({named}): the run's tokenizer must travel with its model"
    )


def init_weights_path(source: str | Path) -> Path:
    """A ``.safetensors`` file as is; a run dir (or its ``checkpoint_latest/`` or ``checkpoint_latest.json``,
    ``run_layout.resolve_run_dir``): its latest checkpoint's ``model.safetensors``."""
    source = Path(source)
    run_dir = resolve_run_dir(source)
    path = source if source.suffix == ".safetensors" else committed_dir(run_dir) / WEIGHTS_FILE
    if not path.is_file() or path.suffix != ".safetensors":
        raise FileNotFoundError(
            f"run.init_from={str(source)!r}: expected a .safetensors file or a run dir holding "
            f"{CHECKPOINT_DIR}/{WEIGHTS_FILE} (or that folder, or {CHECKPOINT_POINTER}); {path} is not one"
        )
    return path


def best_or_latest(run_dir: str | Path) -> tuple[str, dict[str, Any]]:
    """Which checkpoint stands for the run's result, and its pointer: ``best`` (``checkpoint_best``, the best
    validation score) when the run validated, else ``latest``."""
    best = Path(run_dir) / BEST_POINTER
    if best.is_file():
        return "best", json.loads(best.read_text())
    return "latest", read_checkpoint_pointer(run_dir)


def read_checkpoint_pointer(run_dir: str | Path) -> dict[str, Any]:
    """``checkpoint_latest.json``: {"step", "epoch", "model_config", "metrics"}."""
    path = Path(run_dir) / CHECKPOINT_POINTER
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the run in {run_dir} never finished a checkpoint")
    return json.loads(path.read_text())


def committed_dir(run_dir: str | Path) -> Path:
    """The directory holding the checkpoint ``checkpoint_latest.json`` commits to.

    Normally ``checkpoint_latest/``. A process killed (SIGKILL, OOM, preemption) between the two renames
    of ``training.checkpoint.save_checkpoint`` leaves only ``checkpoint_latest.old/``; one killed after the
    swap but before the pointer was written leaves a newer, uncommitted ``checkpoint_latest/`` next to the
    committed ``.old``. Both are read from ``.old`` here, without writing anything (every rank may call
    this), and the next ``save_checkpoint`` on rank 0 restores the layout.
    """
    run_dir = Path(run_dir)
    final, old = run_dir / CHECKPOINT_DIR, run_dir / f"{CHECKPOINT_DIR}.old"
    pointer_path = run_dir / CHECKPOINT_POINTER
    if not old.is_dir() or not pointer_path.is_file():
        return final
    step = str(json.loads(pointer_path.read_text())["step"])
    if _weights_step(final) != step and _weights_step(old) == step:
        return old
    return final


def _weights_step(directory: Path) -> str | None:
    from safetensors import safe_open  # only on the rare .old path; keeps this module light

    try:
        with safe_open(directory / WEIGHTS_FILE, framework="pt") as weights:
            return (weights.metadata() or {}).get("step")
    except Exception:  # missing or half-written: not a checkpoint of any step
        return None


__all__ = [
    "AVERAGED_KEPT_DIR",
    "AVERAGE_FILE",
    "BEST_DIR",
    "BEST_POINTER",
    "CARD_FILE",
    "CHECKPOINT_DIR",
    "CHECKPOINT_POINTER",
    "CONFIG_FILE",
    "DEFAULT_WEIGHTS",
    "EMA_FILE",
    "EXPORT_CONFIG",
    "EXPORT_FORMAT",
    "INDEX_FILE",
    "KEPT_DIR",
    "LOCK_FILE",
    "METRICS_FILE",
    "TOKENIZER_FILE",
    "WEIGHTS",
    "WEIGHTS_FILE",
    "WEIGHTS_HELP",
    "best_or_latest",
    "check_weights",
    "checkpoint_weights",
    "committed_dir",
    "init_weights_path",
    "kept_checkpoints",
    "parse_weights",
    "read_checkpoint_pointer",
    "require_checkpoint",
    "resolve_run_dir",
    "run_tokenizer",
]
