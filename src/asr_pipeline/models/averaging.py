"""The model averaged between two kept checkpoints (icefall's ``--use-averaged-model`` decoding), from the running
averages training keeps with them (``training.ema.RunningAverage``: ``optim.use_averaged_model`` with
``run.keep_checkpoints`` writes ``checkpoints/averaged/step-<step>.safetensors``).

A running average saved after ``s`` steps holds the mean of the weights at the ``k = s // period`` averaging
points so far; two of them give the mean over the points between them, so the early weights, far from the final
ones, drop out. Here, below ``training/``, because decoding, evaluation and export load such a model
(``models.loading.load_run_model``) and must not import training.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file
from torch import Tensor

from asr_pipeline.run_layout import AVERAGED_KEPT_DIR, KEPT_DIR


def average_between(
    start: dict[str, Tensor], start_step: int, end: dict[str, Tensor], end_step: int, period: int
) -> dict[str, Tensor]:
    """The mean of the weights at the averaging points after ``start_step`` up to ``end_step``, from the
    running averages saved at those steps (``RunningAverage.state_dict``): with ``k_s`` and ``k_e`` the
    points each one holds (steps // period), ``(k_e * end - k_s * start) / (k_e - k_s)``, computed as
    ``end + (end - start) * k_s / (k_e - k_s)`` so a long run's large weights never multiply the tensors.
    Tensors that are not floating point (counters) come from ``end``."""
    first, last = start_step // period, end_step // period
    if last <= first:
        raise ValueError(
            f"no averaging point between step {start_step} and step {end_step} (every {period} steps): "
            "choose an end checkpoint at least one averaging period after the start"
        )
    missing = sorted(set(end) - set(start))
    if missing:
        raise KeyError(f"the start average lacks {missing[:5]} ({len(missing)} in all): not the same model")
    ratio = first / (last - first)
    averaged = {}
    for name, value in end.items():
        if not value.is_floating_point():
            averaged[name] = value
            continue
        mean = value.double() + (value.double() - start[name].double()) * ratio
        averaged[name] = mean.to(value.dtype)
    return averaged


def average_kept_checkpoints(run_dir: str | Path, start_step: int | None, end_step: int) -> dict[str, Tensor]:
    """The model averaged over the optimizer steps after ``start_step`` up to ``end_step`` (icefall's
    ``--use-averaged-model`` decoding, ``training.ema.average_between``), from the running averages kept
    with those checkpoints (``optim.use_averaged_model`` with ``run.keep_checkpoints``); ``start_step``
    None: from the start of training. In the model's dtypes, loadable into the model of ``end_step``."""
    folder = Path(run_dir) / KEPT_DIR / AVERAGED_KEPT_DIR

    def read(step: int) -> tuple[dict[str, Tensor], int]:
        path = folder / f"step-{step:08d}.safetensors"
        if not path.is_file():
            kept = sorted(int(p.stem.removeprefix("step-")) for p in folder.glob("step-*.safetensors"))
            raise FileNotFoundError(
                f"{path} does not exist: the run kept running averages at steps {kept or 'none'}; train with "
                "optim.use_averaged_model and run.keep_checkpoints, and pick steps from that list"
            )
        with safe_open(str(path), framework="pt") as handle:
            period = int((handle.metadata() or {})["average_period"])
        return load_file(str(path)), period

    end, period = read(end_step)
    if start_step is None or start_step // period == 0:  # nothing before: the end's average is the mean
        averaged = end
    else:
        start, start_period = read(start_step)
        if start_period != period:
            raise ValueError(
                f"the averages at steps {start_step} and {end_step} were taken every {start_period} and "
                f"{period} steps: only averages of one period combine"
            )
        averaged = average_between(start, start_step, end, end_step, period)
    weights = load_file(str(Path(run_dir) / KEPT_DIR / f"step-{end_step:08d}.safetensors"))
    return {name: value.to(weights[name].dtype) for name, value in averaged.items()}


__all__ = ["average_between", "average_kept_checkpoints"]
