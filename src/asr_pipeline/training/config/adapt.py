"""``train.grow`` and ``train.finetune``: a model that grows during the run, and how a run adapts trained
weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from asr_pipeline.options import setting
from asr_pipeline.training.config.checks import non_negative, positive


@dataclass(frozen=True, kw_only=True)
class GrowConfig:
    """``train.grow``: start with the first ``start_layers`` encoder blocks and add blocks at the start of
    each epoch in ``epochs`` (counting from 1) until the full depth; and/or start at ``start_width`` of the
    model's width and widen at the start of each epoch in ``width_epochs``, by equal steps to the full width
    (training.growth). Depth growth is off when ``start_layers`` is None, widening when ``start_width`` is."""

    start_layers: int | None = setting(
        None,
        help="start with this many encoder blocks and add the rest at --grow-epochs (a growing network)",
        flag="--grow-start-layers",
    )
    epochs: list[int] = setting(
        default_factory=list,
        help="comma-separated epochs (counting from 1) that add encoder blocks, e.g. 3,5",
        flag="--grow-epochs",
        metavar="EPOCH,...",
    )
    layers_per_growth: int | None = setting(
        None,
        help="blocks each growth adds",
        flag="--grow-layers-per-growth",
        shown_default="an even share reaching the full depth at the last growth",
    )
    start_width: float | None = setting(
        None,
        help="start at this fraction of the model's width (heads and channels) and widen at --grow-width-epochs, copying the trained weights into the wider tensors",
        flag="--grow-start-width",
        metavar="FRACTION",
    )
    width_epochs: list[int] = setting(
        default_factory=list,
        help="comma-separated epochs (counting from 1) that widen the model, by equal steps to the full width",
        flag="--grow-width-epochs",
        metavar="EPOCH,...",
    )

    def __post_init__(self) -> None:
        if self.start_width is None:
            if self.width_epochs:
                raise ValueError("width_epochs needs start_width (the width fraction to start from)")
        else:
            if not 0.0 < self.start_width < 1.0:
                raise ValueError(
                    f"start_width is a fraction of the model's width in (0, 1), got {self.start_width}"
                )
            _check_growth_epochs("width_epochs", self.width_epochs, f"start_width={self.start_width}")
        if self.start_layers is None:
            if self.epochs or self.layers_per_growth is not None:
                raise ValueError("epochs and layers_per_growth need start_layers (the depth to start from)")
            return
        positive(self, "start_layers", "layers_per_growth")
        _check_growth_epochs("epochs", self.epochs, f"start_layers={self.start_layers}")

    @property
    def enabled(self) -> bool:
        return self.start_layers is not None or self.start_width is not None


def _check_growth_epochs(name: str, epochs: list[int], start: str) -> None:
    if not epochs or any(epoch < 2 for epoch in epochs) or sorted(set(epochs)) != epochs:
        raise ValueError(
            f"{name} must list the epochs that grow the model, increasing and from 2 on (epoch 1 trains at "
            f"{start}), got {epochs}"
        )


@dataclass(frozen=True, kw_only=True)
class FinetuneConfig:
    """``train.finetune``: how a run adapts the weights it starts from (``run.init_from``, or a Hugging Face
    folder through ``model.pretrained_dir``) to its data (training.finetune).

    ``full`` trains every weight, optionally with the front-end and/or the first ``freeze_layers`` encoder
    blocks frozen for the first ``freeze_epochs`` epochs (None: the whole run). ``lora`` freezes the model and
    trains LoRA adapters on the architecture's attention and feed-forward projections (models.lora); its
    checkpoints hold only the adapters, and ``merge_lora`` writes a plain run dir with them folded in
    (``<output_dir>/merged``) when training ends.
    """

    method: Literal["full", "lora"] = setting(
        "full",
        help="how a run started from --init-from (or --w2v-hf-load-weights) trains: every weight (full), or LoRA adapters on the attention and feed-forward projections only (lora; checkpoints hold the adapters)",
        flag="--finetune-method",
    )
    freeze_frontend: bool = setting(
        False,
        help="full fine-tuning: hold the front-end (subsampling / feature projection) still for --freeze-epochs",
        flag="--freeze-frontend",
    )
    freeze_layers: int = setting(
        0,
        help="full fine-tuning: hold the first N encoder blocks still for --freeze-epochs",
        flag="--freeze-layers",
        metavar="N",
    )
    freeze_epochs: int | None = setting(
        None,
        help="epochs the frozen modules stay frozen, then they train too",
        flag="--freeze-epochs",
        shown_default="the whole run",
    )
    lora_rank: int = setting(8, help="LoRA rank r of each adapter (B A, A: r x in)", flag="--lora-rank")
    lora_alpha: float = setting(16.0, help="LoRA scale: the update is (alpha / r) B A", flag="--lora-alpha")
    lora_dropout: float = setting(0.0, help="dropout on the adapters' input", flag="--lora-dropout")
    lora_target_modules: str | None = setting(
        None,
        help="regular expression over module names of the linears to adapt",
        flag="--lora-target-modules",
        metavar="REGEX",
        shown_default="the architecture's attention and feed-forward projections",
    )
    merge_lora: bool = setting(
        False,
        help="when training ends, fold the best checkpoint's adapters into the base weights: a plain run dir in <output-dir>/merged",
        flag="--merge-lora",
    )

    def __post_init__(self) -> None:
        positive(self, "freeze_epochs", "lora_rank", "lora_alpha")
        non_negative(self, "freeze_layers")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"finetune.lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.method == "lora" and (self.freeze_frontend or self.freeze_layers or self.freeze_epochs):
            raise ValueError(
                "finetune.method lora already freezes every base weight; freeze_frontend, freeze_layers and "
                "freeze_epochs apply to method full"
            )
        if self.merge_lora and self.method != "lora":
            raise ValueError(
                "finetune.merge_lora (--merge-lora) needs finetune.method lora (--finetune-method lora)"
            )
        if self.freeze_epochs is not None and not (self.freeze_frontend or self.freeze_layers):
            raise ValueError(
                "finetune.freeze_epochs needs something to freeze: freeze_frontend or freeze_layers"
            )

    @property
    def freezes(self) -> bool:
        return self.freeze_frontend or self.freeze_layers > 0
