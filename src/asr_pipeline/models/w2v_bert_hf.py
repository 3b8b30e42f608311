"""Hugging Face import for W2V-BERT, without network or ``transformers``: a ``Wav2Vec2BertConfig``'s
config.json -> our ``W2VBertConfig`` fields, and its safetensors weights -> a ``W2VBertCTC``.

    values = config_from_hf("w2v-bert-2.0/")              # a directory, or its config.json
    model = build_w2v_bert(W2VBertConfig(**{**values, "vocab_size": 129}))
    report = load_hf_weights(model, "w2v-bert-2.0/")      # prints what loaded, what did not and why

Checkpoints of ``Wav2Vec2BertModel`` (names without a prefix) and of ``Wav2Vec2BertForCTC``
(``wav2vec2_bert.``-prefixed, plus ``lm_head``) both load, from ``model.safetensors`` or a sharded
``model.safetensors.index.json``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import Tensor, nn

from asr_pipeline.models.w2v_bert import ACTIVATIONS, W2VBertCTC
from asr_pipeline.models.w2v_bert_spec import POSITION_EMBEDDINGS_TYPES

ENCODER_PREFIX = "wav2vec2_bert."
# HF name -> our config field, where they differ; SAME_NAME: the HF options we read under their own name.
RENAMED = {
    "hidden_size": "d_model",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "feature_projection_input_dim": "input_dim",
}
SAME_NAME = [
    "vocab_size",
    "intermediate_size",
    "hidden_act",
    "conv_depthwise_kernel_size",
    "position_embeddings_type",
    "left_max_position_embeddings",
    "right_max_position_embeddings",
    "rotary_embedding_base",
    "layer_norm_eps",
    "hidden_dropout",
    "activation_dropout",
    "attention_dropout",
    "feat_proj_dropout",
    "conformer_conv_dropout",
    "final_dropout",
    "apply_spec_augment",
    "mask_time_prob",
    "mask_time_length",
    "mask_time_min_masks",
    "mask_feature_prob",
    "mask_feature_length",
    "mask_feature_min_masks",
    "add_adapter",
    "adapter_kernel_size",
    "adapter_stride",
    "num_adapter_layers",
    "adapter_act",
    "use_intermediate_ffn_before_adapter",
    "output_hidden_size",
]
# Keys that do not change the encoder or the CTC head's outputs: other heads, the loss, token ids,
# initialisation, and max_source_positions (HF's cache size for "relative" sinusoids; ours are computed
# for any length, with the same values).
# layerdrop is not imported either (a training choice, 0.1 in w2v-bert-2.0's config): a layer skipped on one
# DDP rank and not on another breaks the gradient all-reduce. --model-option layerdrop=0.1 sets it.
IRRELEVANT = set(
    [
        "layerdrop",
        "model_type",
        "architectures",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "initializer_range",
        "max_source_positions",
        "ctc_loss_reduction",
        "ctc_zero_infinity",
        "use_weighted_layer_sum",
        "classifier_proj_size",
        "tdnn_dim",
        "tdnn_kernel",
        "tdnn_dilation",
        "xvector_output_dim",
        "pad_token_id",
        "bos_token_id",
        "eos_token_id",
        "id2label",
        "label2id",
        "num_labels",
        "problem_type",
        "return_dict",
        "output_hidden_states",
        "output_attentions",
        "use_return_dict",
        "tie_word_embeddings",
        "chunk_size_feed_forward",
        "is_encoder_decoder",
        "_name_or_path",
    ]
)


def read_hf_config(path: str | Path, model_type: str) -> tuple[Path, dict[str, Any]]:
    """A HF directory's config.json (or that file itself): its path and values; FileNotFoundError without
    one, ValueError when its ``model_type`` is another model's."""
    config_path = Path(path)
    if config_path.is_dir():
        config_path = config_path / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(
            f"{config_path}: no such file; give a Hugging Face model directory or its config.json"
        )
    hf = json.loads(config_path.read_text())
    if hf.get("model_type", model_type) != model_type:
        raise ValueError(f"{config_path}: model_type is {hf['model_type']!r}, expected {model_type!r}")
    return config_path, hf


def config_from_hf(path: str | Path) -> dict[str, object]:
    """A HF directory holding config.json, or the config.json itself -> ``W2VBertConfig`` fields.

    A bare ``Wav2Vec2BertModel``'s config has no vocabulary: ``vocab_size`` is then left out, for the
    caller to give. Option values this implementation lacks are refused, each named with the values it has.
    """
    config_path, hf = read_hf_config(path, "wav2vec2-bert")

    problems = []
    for key in ("hidden_act", "adapter_act"):
        if key in hf and hf[key] not in ACTIVATIONS:
            problems.append(f"{key}={hf[key]!r} (implemented: {', '.join(ACTIVATIONS)})")
    if hf.get("position_embeddings_type", "relative_key") not in POSITION_EMBEDDINGS_TYPES:
        problems.append(
            f"position_embeddings_type={hf['position_embeddings_type']!r} "
            f"(implemented: {', '.join(map(str, POSITION_EMBEDDINGS_TYPES))})"
        )
    if problems:
        raise ValueError(
            f"{config_path}: options this W2V-BERT implementation does not support: {'; '.join(problems)}"
        )

    values: dict[str, object] = {
        RENAMED.get(key, key): hf[key] for key in (*RENAMED, *SAME_NAME) if key in hf
    }
    if values.get("vocab_size") is None:
        values.pop("vocab_size", None)
    if values.get("output_hidden_size") == values.get("d_model"):
        values["output_hidden_size"] = None  # HF writes hidden_size there when unset
    unused = sorted(set(hf) - set(RENAMED) - set(SAME_NAME) - IRRELEVANT)
    if unused:
        print(
            f"[w2v-bert] {config_path}: ignored keys this import does not know (not read by the encoder or the CTC head): {', '.join(unused)}"
        )
    return values


@dataclass(frozen=True)
class WeightImportReport:
    """What ``load_hf_weights`` did, name by name (our state-dict names, except ``skipped``'s)."""

    loaded: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (checkpoint name, reason)
    left_at_init: tuple[str, ...]  # parameters of ours no checkpoint tensor filled

    def to_event(self, path: str | Path) -> dict[str, Any]:
        """The report as the ``pretrained`` training event writes it (counts and reasons)."""
        return {
            "path": str(path),
            "loaded": len(self.loaded),
            "skipped": dict(self.skipped),
            "left_at_init": list(self.left_at_init),
        }

    def summary(self) -> str:
        lines = [f"loaded {len(self.loaded)} tensors"]
        lines += [f"skipped {name}: {reason}" for name, reason in self.skipped]
        lines += [f"left at initialisation: {name}" for name in self.left_at_init]
        return "\n".join(lines)


def checkpoint_files(directory: Path) -> list[Path]:
    """model.safetensors, or the shards a model.safetensors.index.json names."""
    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    if single.is_file():
        return [single]
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [directory / shard for shard in shards]
    raise FileNotFoundError(
        f"{directory}: neither model.safetensors nor model.safetensors.index.json; a pytorch_model.bin "
        "checkpoint must be re-saved with safetensors (save_pretrained(..., safe_serialization=True))"
    )


def our_name(hf_name: str) -> str:
    """``wav2vec2_bert.x`` and ``lm_head.x`` stay; a bare ``Wav2Vec2BertModel``'s ``x`` gains the prefix."""
    if hf_name.startswith((ENCODER_PREFIX, "lm_head.")):
        return hf_name
    return ENCODER_PREFIX + hf_name


def checkpoint_tensors(directory: Path) -> Iterator[tuple[str, Callable[[], Tensor]]]:
    """(name, loader) of every tensor in a HF folder's safetensors files; a tensor is read only when its
    loader is called, one file open at a time."""
    for file in checkpoint_files(directory):
        with safe_open(str(file), framework="pt") as tensors:
            for name in tensors.keys():  # noqa: SIM118 (safe_open is not a dict)
                yield name, functools.partial(tensors.get_tensor, name)


def copy_matching(
    model: nn.Module,
    tensors: Iterable[tuple[str, Callable[[], Tensor]]],
    rename: Callable[[str], str],
    unknown_reason: Callable[[str], str] = lambda name: "unknown name",
) -> WeightImportReport:
    """Copy each of ``tensors`` (checkpoint name, loader) into ``model``'s tensor ``rename(name)`` where that
    exists with the same shape; the rest are skipped with a reason (``unknown_reason(our name)`` for a name
    the model lacks, read never). Parameters no tensor filled are reported as left at initialisation."""
    ours = model.state_dict()
    loaded, skipped = [], []
    with torch.no_grad():
        for checkpoint_name, load in tensors:
            name = rename(checkpoint_name)
            if name not in ours:
                skipped.append((checkpoint_name, unknown_reason(name)))
                continue
            tensor = load()
            if tensor.shape != ours[name].shape:
                skipped.append((checkpoint_name, f"shape {list(tensor.shape)} -> {list(ours[name].shape)}"))
                continue
            ours[name].copy_(tensor)
            loaded.append(name)
    filled = set(loaded)
    left = tuple(name for name, _ in model.named_parameters() if name not in filled)
    return WeightImportReport(tuple(loaded), tuple(skipped), left)


def _unknown_reason(name: str) -> str:
    if name == ENCODER_PREFIX + "masked_spec_embed":
        return (
            "unknown name (this config has no masked_spec_embed: mask_time_prob and mask_feature_prob are 0)"
        )
    return "unknown name"


def load_hf_weights(model: W2VBertCTC, path: str | Path, verbose: bool = True) -> WeightImportReport:
    """Copy a HF checkpoint's tensors into ``model`` where name and shape agree; report the rest (and
    print it when ``verbose``)."""
    directory = Path(path)
    if directory.is_file():  # config.json or model.safetensors given: its directory
        directory = directory.parent
    report = copy_matching(model, checkpoint_tensors(directory), our_name, _unknown_reason)
    if verbose:
        print(f"[w2v-bert] weights from {directory}:\n{report.summary()}", flush=True)
    return report


def load_pretrained(model: W2VBertCTC, path: Path, verbose: bool) -> dict[str, Any]:
    """``load_hf_weights``'s report as the ``pretrained`` training event writes it (counts and reasons): the
    spec's ``load_pretrained``."""
    return load_hf_weights(model, path, verbose=verbose).to_event(path)
