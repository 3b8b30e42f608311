"""``train.run`` and ``train.validation``: where and how a run executes, and how it is scored."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Literal, get_args

from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.options import setting
from asr_pipeline.training.config.checks import non_negative, positive

# torch.compile's own mode names, and "off" for the eager model (training.compile).
CompileMode = Literal["off", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
COMPILE_MODES: tuple[str, ...] = get_args(CompileMode)
# What it compiles: the whole forward, or each repeated layer on its own (training.compile.LayerCompiled).
CompileScope = Literal["model", "layers"]
COMPILE_SCOPES: tuple[str, ...] = get_args(CompileScope)
_SWITCH_WORDS = {"true": True, "on": True, "yes": True, "false": False, "no": False}


def compile_mode(value: str | bool) -> str:
    """``run.compile``'s value as a mode name: a switch (true/on/yes, false/off/no) means "default" or
    "off", as ``torch.compile(model)`` and no compile do; YAML reads a bare ``off`` as false."""
    if isinstance(value, bool):
        return "default" if value else "off"
    text = value.strip().lower()
    if text in COMPILE_MODES:
        return text
    if text in _SWITCH_WORDS:
        return "default" if _SWITCH_WORDS[text] else "off"
    raise ValueError(
        f"run.compile: expected one of {', '.join(COMPILE_MODES)} (or true/false), got {value!r}"
    )


def inductor_options(text: str | None) -> dict[str, object]:
    """``run.compile_options`` as inductor config settings: comma-separated KEY=VALUE, KEY a
    ``torch._inductor.config`` setting (dotted for a nested one: ``triton.cudagraphs``), VALUE a Python
    literal (True, 128, ...) of the setting's type, or a string where the setting takes one. Empty or None:
    none."""
    if not text:
        return {}
    from torch._inductor import config

    known, options = config.get_config_copy(), {}
    for item in text.split(","):
        key, equals, value = (part.strip() for part in item.partition("="))
        if not equals or key not in known:
            raise ValueError(
                f"run.compile_options: expected KEY=VALUE pairs, comma-separated, with KEY a torch._inductor.config "
                f"setting (combo_kernels=True); got {item.strip()!r}"
            )
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
        default = known[key]  # a value of another type than the default's (false for False) is a typo
        kind = type(default)
        if default is not None and not (
            isinstance(options[key], kind) or (kind is float and type(options[key]) is int)
        ):
            raise ValueError(
                f"run.compile_options: {key} takes a value of type {kind.__name__} (its default is {default!r}), got {value!r}"
            )
    return options


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    output_dir: str = setting("runs/asr", help="the run dir: config, events, checkpoints, metrics")
    tokenizer: str | None = setting(
        None, help="SentencePiece .model; needed for vocab inference and text CER/WER"
    )
    seed: int = setting(0, help="random seed", flag="--seed")
    log_every: int = setting(10, help="optimizer steps between train events", flag="--log-every")
    backend: Literal["cpu", "cuda"] = setting("cpu", help="device type", flag="--backend")
    # CUDA devices (training.distributed.select_device): device_indices lists one GPU per process of a
    # node (local rank i uses cuda:device_indices[i]); without it a single process uses cuda:device_index
    # and several processes use cuda:<local rank>.
    device_index: int = setting(
        0,
        help="the CUDA device of a single-process run (cuda:N); several processes without --device-indices use cuda:<local rank>",
        flag="--device-index",
    )
    device_indices: list[int] = setting(
        default_factory=list,
        help="comma-separated CUDA devices, one torchrun process each: local rank i trains on cuda:LIST[i]; --nproc-per-node defaults to their count and must equal it when given",
        flag="--device-indices",
        metavar="LIST",
        shown_default="unset",
    )
    # f16 and bf16 run the forward pass under torch.autocast (CTC stays float32); f16 also scales the loss
    # with a GradScaler, whose state is checkpointed. Weights and optimizer state stay float32.
    precision: Literal["f32", "bf16", "f16"] = setting(
        "f32",
        help="training precision: bf16/f16 autocast the forward pass (f16 with a checkpointed gradient scaler); weights stay float32",
        flag="--precision",
    )
    # Whose code runs the models' hot-spot ops (asr_kernels): auto = on CUDA the Triton kernels measured to
    # pay (asr_kernels.AUTO_KERNELS; inside torch.compile only those beating the compiled reference), the
    # PyTorch references elsewhere; reference or triton force one (triton on a CPU needs TRITON_INTERPRET=1).
    kernels: Literal["auto", "reference", "triton"] = setting(
        "auto",
        help="the models' hot-spot ops: auto = on CUDA the Triton kernels measured to pay at large batches (asr_kernels.AUTO_KERNELS), PyTorch references elsewhere; reference or triton forces every op",
        flag="--kernels",
    )
    # torch.compile of the training forward (+ backward through AOTAutograd); validation and the dry run
    # stay eager. Batches of varying length recompile per new time length unless data.pad_to_buckets pads
    # them to a few (training.compile, docs/training.md "Compiling the model").
    compile: CompileMode | bool = setting(
        "off",
        help="torch.compile the training step's model: off, default, reduce-overhead (CUDA graphs), max-autotune, max-autotune-no-cudagraphs (torch.compile's modes; true = default); pair with --pad-to-buckets so varying batch lengths compile a few times, not once per length",
        flag="--compile",
        metavar="MODE",
        parse=compile_mode,
    )
    compile_scope: CompileScope = setting(
        "model",
        help="what --compile compiles: model = the whole forward (the most fusion); layers = each repeated layer on its own, layers of one shape sharing a graph (a cold compile traces Zipformer-M's 4 distinct layers, not its 16), the glue between them eager",
        flag="--compile-scope",
    )
    compile_backend: str = setting(
        "inductor",
        help="torch.compile backend: inductor generates fused kernels; aot_eager traces forward and backward alike without generating any (a quick check of graph breaks and recompilations)",
        flag="--compile-backend",
        metavar="NAME",
    )
    compile_options: str | None = setting(
        None,
        help="inductor config settings for --compile on top of its mode's, comma-separated KEY=VALUE (combo_kernels=True: independent small kernels, such as the per-weight bf16 casts, share one launch); other backends take none, as they take no mode",
        flag="--compile-options",
        metavar="KEY=VALUE,...",
    )
    # Inductor's kernels and FX graphs (TORCHINDUCTOR_CACHE_DIR = <dir>/inductor) and torch's mega-cache
    # (<dir>/artifacts.bin). Outside the run dir on purpose: dvc repro deletes a stage's outputs before
    # it runs, so a cache in the run dir would be cold at every rerun.
    compile_cache: str | None = setting(
        None,
        help="the compile cache folder, reused by every run and resume that names it (inductor/ and artifacts.bin inside); unset: the per-user cache $XDG_CACHE_HOME/asr_pipeline/compile",
        flag="--compile-cache",
        metavar="DIR",
        shown_default="$XDG_CACHE_HOME/asr_pipeline/compile (~/.cache/asr_pipeline/compile)",
    )
    threads_per_rank: int | None = setting(
        None, help="CPU: torch threads per rank; None: max(1, cores // world size)"
    )
    checkpoint_every_steps: int | None = setting(
        None,
        help="optimizer steps between extra mid-epoch checkpoints; unset: one per epoch only",
        flag="--checkpoint-every-steps",
    )
    # Also keep every checkpoint's weights as checkpoints/step-<step>.safetensors (training.checkpoint), so
    # each can be validated later (HuBERT's recipe picks the best by validation loss this way).
    keep_checkpoints: bool = setting(
        False,
        help="also keep every checkpoint's weights as checkpoints/step-<step>.safetensors in the run dir",
        flag="--keep-checkpoints",
    )
    resume_from: str | None = setting(
        None,
        help="continue the run in this run dir from its checkpoint_latest (the run dir, its checkpoint_latest/ or its checkpoint_latest.json)",
        flag="--resume-from",
        metavar="DIR",
    )
    # Start from these weights (a run dir's checkpoint_latest, or a .safetensors file); tensors whose name
    # or shape differ are skipped and reported. Ignored when resume_from is set: the checkpoint wins.
    init_from: str | None = setting(
        None,
        help="start from a run dir's (or its checkpoint_latest/ or checkpoint_latest.json) or a .safetensors file's weights (matching tensors); ignored with --resume-from",
        flag="--init-from",
        metavar="PATH",
    )
    dry_run: bool = setting(
        False,
        help="forward + loss on the first batch only, to check data, model and device; no step, no checkpoint",
        flag="--dry-run",
    )
    tui: bool = setting(
        False, help="a live table of loss, throughput, LR and validation (rank 0)", flag="--tui"
    )
    # Rank 0 also logs the curves to DVCLive (dvc plots show, dvc exp show). False: events.jsonl and
    # metrics.json only, for machines without dvc (a cluster node, a GPU box) or runs nobody plots.
    dvclive: bool = setting(
        True,
        help="do not log curves to DVCLive (events.jsonl and metrics.json are still written)",
        flag="--no-dvclive",
        const=False,
    )
    # Abort once more micro-batches than this (summed over ranks, over the whole run) had a NaN/inf loss.
    # 100: a few broken batches are skipped and survived, while a diverged model fails every batch and
    # stops within 100 / world_size micro-batches instead of burning its budget. None: never abort.
    max_non_finite_losses: int | None = setting(
        100,
        help="abort once more batches than this had a NaN/inf loss (summed over ranks; counted at each train event, every --log-every steps, checkpoint and epoch end)",
        flag="--max-non-finite-losses",
    )
    # Bitwise-reproducible weights (training.determinism): seeded RNGs, deterministic algorithms, cuDNN and
    # cuBLAS settings. Off: the same results up to nondeterministic CUDA kernels.
    deterministic: bool = setting(
        False,
        help="bitwise-reproducible weights: seeded RNGs, torch deterministic algorithms, cuDNN/cuBLAS settings (some CUDA kernels run slower)",
        flag="--deterministic",
    )
    # Upload every checkpoint to the Hugging Face Hub (publish.hub.CheckpointUploader: rank 0, a background
    # thread, retried, never fatal) as checkpoint-<step>/ of hf_upload_repo_id at hf_upload_revision. The
    # token is huggingface_hub's (HF_TOKEN or its login), never part of the config.
    hf_upload_checkpoints: bool = setting(
        False,
        help="upload every checkpoint to the Hugging Face Hub (rank 0, in the background, retried, never fatal) as checkpoint-<step>/; the token is HF_TOKEN or huggingface_hub's login",
        flag="--hf-upload-checkpoints",
    )
    hf_upload_repo_id: str | None = setting(
        None, help="the Hub repo (namespace/name)", flag="--hf-upload-repo-id", metavar="ID"
    )
    hf_upload_revision: str = setting(
        "main", help="the branch to commit to", flag="--hf-upload-revision", metavar="REV"
    )
    hf_upload_private: bool = setting(False, help="create the repo private", flag="--hf-upload-private")
    hf_upload_checkpoint_format: Literal["safetensors"] = setting(
        "safetensors",
        help="what a checkpoint is uploaded as: safetensors (the weights, the pointer, the config, the tokenizer)",
        flag="--hf-upload-checkpoint-format",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "compile", compile_mode(self.compile))  # a switch becomes its mode name
        inductor_options(self.compile_options)  # a setting inductor lacks is refused now, not at the compile
        if self.hf_upload_checkpoints and not self.hf_upload_repo_id:
            raise ValueError(
                "hf_upload_checkpoints needs hf_upload_repo_id (--hf-upload-repo-id namespace/name)"
            )
        positive(self, "log_every", "threads_per_rank", "checkpoint_every_steps")
        non_negative(self, "max_non_finite_losses", "device_index")
        if any(index < 0 for index in self.device_indices):
            raise ValueError(f"device_indices must be >= 0, got {self.device_indices}")
        if len(set(self.device_indices)) != len(self.device_indices):
            raise ValueError(
                f"device_indices={self.device_indices} names a GPU twice; give each process its own GPU"
            )
        if self.backend != "cuda" and (self.device_indices or self.device_index != 0):
            raise ValueError(
                f"device_index={self.device_index} / device_indices={self.device_indices} choose CUDA "
                f"devices, but backend is {self.backend!r}: set backend 'cuda' (--backend cuda) or drop them"
            )
        if self.device_indices and self.device_index != 0:
            raise ValueError(
                f"device_index={self.device_index} and device_indices={self.device_indices} are both set; "
                "give one GPU with --device-index or one per process with --device-indices"
            )


@dataclass(frozen=True, kw_only=True)
class ValidationConfig:
    """Scoring the validation manifests: after every epoch, and every ``every_steps`` optimizer steps.

    ``decoding`` is the one decoding options shape (``decoding.options.DecodingOptions``) that `evaluate`
    and ``asr-pipeline decode`` use too: greedy by default; ``decoder: lexicon`` with ``lexicon_path`` and a
    word KenLM in ``lm_path`` decodes as `evaluate` does, so a validation CER predicts the evaluated one.
    """

    every_steps: int | None = setting(
        None,
        help="optimizer steps between extra mid-epoch validations; unset: after every epoch only",
        flag="--validate-every-steps",
    )
    decoding: DecodingOptions = setting(
        default_factory=DecodingOptions,
        help="the validation decoder's options (decoding.options), set by the --val-* flags",
        flag_prefix="--val-",
    )
    lm_path: str | None = setting(
        None,
        help="KenLM fused by the validation decoder: word LM (lexicon, prefix_beam) or piece LM (lexicon_free)",
        flag="--val-lm-path",
        metavar="PATH",
    )
    lexicon_path: str | None = setting(
        None,
        help="the lexicon decoder's word list (word<TAB>pieces; the tokenizer stage's lexicon.txt)",
        flag="--val-lexicon",
        metavar="PATH",
    )
    log_samples: int = setting(
        0,
        help="sample predictions (id, reference, hypothesis, n-best) written into each validation event",
        flag="--val-log-samples",
    )
    # One more validation pass per average: the averages are loaded into the model, scored, and the raw
    # weights put back bit for bit (training.trainer_state), so training continues unchanged.
    score_averages: bool = setting(
        False,
        help="also score the weight averages training keeps at every validation, one more pass each: "
        "optim.use_averaged_model's running average as val_cer_averaged, optim.ema_decay's EMA as val_cer_ema "
        "(with their wer, loss and duration_sec) beside the raw weights' val_cer, which still chooses "
        "checkpoint_best",
        flag="--val-score-averages",
    )

    def __post_init__(self) -> None:
        positive(self, "every_steps")
        non_negative(self, "log_samples")
        if self.lm_path is not None and self.decoding.lm_kind is None:
            raise ValueError(
                f"lm_path is set but the {self.decoding.decoder} decoder fuses no LM; set "
                "validation.decoding.decoder (--val-decoder) to lexicon, lexicon_free or prefix_beam"
            )

    @property
    def uses_beam_search(self) -> bool:
        return self.decoding.decoder != "greedy"
