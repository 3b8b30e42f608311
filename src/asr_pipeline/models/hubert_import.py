"""Other HuBERT checkpoints into ours (``models.hubert``): torchaudio state dicts and Hugging Face folders,
without network access.

    torchaudio ``HuBERTPretrainModel`` / ``Wav2Vec2Model``   ours (``HubertPretrain`` / ``HubertCTC``)
      wav2vec2.feature_extractor.*  (or feature_extractor.*)  hubert.feature_extractor.*
      wav2vec2.encoder.*            (or encoder.*)            hubert.encoder.*
      mask_generator.mask_embedding                           hubert.mask_embedding
      logit_generator.final_proj.* / .label_embeddings        final_proj.* / label_embeddings
      aux.*  (a CTC head)                                     ctc_head.*
    Hugging Face ``HubertModel`` / ``HubertForCTC`` (``hubert.``-prefixed)
      feature_extractor.*                                     hubert.feature_extractor.*
      feature_projection.*                                    hubert.encoder.feature_projection.*
      encoder.*                                               hubert.encoder.transformer.*
      masked_spec_embed                                       hubert.mask_embedding
      lm_head.*                                               ctc_head.*

Weight-normalised positional convs saved with the old ``weight_g`` / ``weight_v`` names load as
``parametrizations.weight.original0`` / ``original1``. A torchaudio state dict carries no config: build ours
with ``torchaudio_config_values`` of the arguments the torchaudio model was built with.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from asr_pipeline.models.w2v_bert_hf import (
    WeightImportReport,
    checkpoint_tensors,
    copy_matching,
    read_hf_config,
)

_OLD_WEIGHT_NORM = {
    "weight_g": "parametrizations.weight.original0",
    "weight_v": "parametrizations.weight.original1",
}


def torchaudio_name(name: str) -> str:
    """A torchaudio HuBERT / wav2vec 2.0 state-dict name -> ours."""
    name = re.sub(r"^wav2vec2\.", "", name)
    if name.startswith(("feature_extractor.", "encoder.")):
        return "hubert." + name
    if name == "mask_generator.mask_embedding":
        return "hubert.mask_embedding"
    if name.startswith("logit_generator."):
        return name.removeprefix("logit_generator.")
    if name.startswith("aux."):
        return "ctc_head." + name.removeprefix("aux.")
    return name


def hf_name(name: str) -> str:
    """A Hugging Face ``HubertModel`` / ``HubertForCTC`` state-dict name -> ours."""
    name = name.removeprefix("hubert.")
    if name.startswith("feature_extractor."):
        return "hubert." + name
    if name.startswith("feature_projection."):
        return "hubert.encoder." + name
    if name.startswith("encoder."):
        return "hubert.encoder.transformer." + name.removeprefix("encoder.")
    if name == "masked_spec_embed":
        return "hubert.mask_embedding"
    if name.startswith("lm_head."):
        return "ctc_head." + name.removeprefix("lm_head.")
    return name


def _new_weight_norm(name: str) -> str:
    stem, _, leaf = name.rpartition(".")
    return f"{stem}.{_OLD_WEIGHT_NORM[leaf]}" if leaf in _OLD_WEIGHT_NORM else name


def load_state(
    model: nn.Module, tensors: Mapping[str, Tensor], rename, source: str, verbose: bool = True
) -> WeightImportReport:
    """Copy ``tensors`` (their names through ``rename``) into ``model`` where name and shape agree;
    report the rest (printed when ``verbose``)."""
    report = _copy(model, ((name, functools.partial(tensors.__getitem__, name)) for name in tensors), rename)
    return _reported(report, source, verbose)


def _copy(model: nn.Module, tensors, rename) -> WeightImportReport:
    return copy_matching(
        model,
        tensors,
        lambda name: _new_weight_norm(rename(name)),
        lambda name: "no such tensor in this model",
    )


def _reported(report: WeightImportReport, source: str, verbose: bool) -> WeightImportReport:
    if verbose:
        print(f"[hubert] weights from {source}:\n{report.summary()}", flush=True)
    return report


def load_torchaudio_state(
    model: nn.Module, state: Mapping[str, Tensor] | str | Path, verbose: bool = True
) -> WeightImportReport:
    """A torchaudio ``hubert_pretrain_model`` / ``Wav2Vec2Model`` state dict (or a file ``torch.save``
    wrote it to) into ``model``."""
    source = "a state dict"
    if isinstance(state, str | Path):
        source, state = str(state), torch.load(state, map_location="cpu", weights_only=True)
    return load_state(model, state, torchaudio_name, source, verbose)


def torchaudio_config_values(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``torchaudio.models.hubert_pretrain_model``'s arguments -> our ``HubertConfig`` fields."""
    renamed = {
        "extractor_mode": "extractor_mode",
        "extractor_conv_layer_config": "conv_layers",
        "extractor_conv_bias": "conv_bias",
        "encoder_embed_dim": "d_model",
        "encoder_projection_dropout": "dropout",
        "encoder_pos_conv_kernel": "pos_conv_kernel",
        "encoder_pos_conv_groups": "pos_conv_groups",
        "encoder_num_layers": "num_layers",
        "encoder_num_heads": "num_heads",
        "encoder_attention_dropout": "attention_dropout",
        "encoder_ff_interm_features": "ff_dim",
        "encoder_ff_interm_dropout": "activation_dropout",
        "encoder_layer_norm_first": "layer_norm_first",
        "mask_prob": "mask_prob",
        "mask_length": "mask_length",
        "num_classes": "num_classes",
        "final_dim": "final_dim",
    }
    values = {ours: arguments[theirs] for theirs, ours in renamed.items() if theirs in arguments}
    if arguments.get("feature_grad_mult") is not None:
        values["feature_grad_mult"] = arguments["feature_grad_mult"]
    return values


def hf_config_values(path: str | Path) -> dict[str, Any]:
    """A Hugging Face HuBERT folder (or its config.json) -> our ``HubertConfig`` fields."""
    config_path, hf = read_hf_config(path, "hubert")
    if hf.get("feat_extract_activation", "gelu") != "gelu" or hf.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"{config_path}: only GELU activations are implemented")
    if not hf.get("feat_proj_layer_norm", True) or hf.get("conv_pos_batch_norm", False):
        raise ValueError(
            f"{config_path}: feat_proj_layer_norm=false and conv_pos_batch_norm are not implemented"
        )
    values: dict[str, Any] = {
        "d_model": hf.get("hidden_size", 768),
        "num_layers": hf.get("num_hidden_layers", 12),
        "num_heads": hf.get("num_attention_heads", 12),
        "ff_dim": hf.get("intermediate_size", 3072),
        "conv_layers": tuple(
            zip(
                hf.get("conv_dim", (512,) * 7),
                hf.get("conv_kernel", (10, 3, 3, 3, 3, 2, 2)),
                hf.get("conv_stride", (5, 2, 2, 2, 2, 2, 2)),
                strict=True,
            )
        ),
        "extractor_mode": f"{hf.get('feat_extract_norm', 'group')}_norm",
        "conv_bias": hf.get("conv_bias", False),
        "pos_conv_kernel": hf.get("num_conv_pos_embeddings", 128),
        "pos_conv_groups": hf.get("num_conv_pos_embedding_groups", 16),
        "layer_norm_first": hf.get("do_stable_layer_norm", False),
        "attention_dropout": hf.get("attention_dropout", 0.1),
        "activation_dropout": hf.get("activation_dropout", 0.1),
        "layer_norm_eps": hf.get("layer_norm_eps", 1e-5),
        "dropout": hf.get("hidden_dropout", 0.1),
    }
    if hf.get("vocab_size") is not None and hf.get("architectures") == ["HubertForCTC"]:
        values["vocab_size"] = hf["vocab_size"]
    return values


def load_hf_weights(model: nn.Module, path: str | Path, verbose: bool = True) -> WeightImportReport:
    """A Hugging Face HuBERT folder's safetensors weights into ``model``."""
    directory = Path(path)
    if directory.is_file():
        directory = directory.parent
    return _reported(_copy(model, checkpoint_tensors(directory), hf_name), str(directory), verbose)


def load_pretrained(model: nn.Module, path: Path, verbose: bool) -> dict[str, Any]:
    """A Hugging Face HuBERT folder's weights; the ``pretrained`` event's report (the spec's
    ``load_pretrained``)."""
    return load_hf_weights(model, path, verbose=verbose).to_event(path)


__all__ = [
    "hf_config_values",
    "hf_name",
    "load_hf_weights",
    "load_pretrained",
    "load_state",
    "load_torchaudio_state",
    "torchaudio_config_values",
    "torchaudio_name",
]
