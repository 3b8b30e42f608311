"""ABX discriminability of frame features on a phone item file: ZeroSpeech 2021's phoneme task through
``fastabx`` (angular frame distance, DTW averaged along the path, within-context triplets, cells subsampled to
10 items and 5 X across speakers, error rates averaged over contexts, then speakers).

``abx_errors`` scores one representation (every utterance's (T, D) frames at ``frequency`` Hz), within and
across speakers; ``layer_features`` gives a HuBERT model's per-layer frames of a loader's utterances, so one
forward pass serves every layer.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

MAX_SIZE_GROUP = 10  # ZeroSpeech's subsampling: at most 10 A, B or X per cell
MAX_X_ACROSS = 5  # and 5 X speakers per (A, B) across speakers
SPEAKER_MODES = ("within", "across")


def abx_errors(
    item: str | Path, features: Mapping[str, Tensor], frequency: int | str, seed: int = 0
) -> dict[str, float | None]:
    """ABX error rates in percent (``within``, ``across`` speakers; chance is 50) of ``features`` (utterance
    id -> (T, D) frames at ``frequency`` Hz) on the item file's phones, in their context. A mode whose task
    has no cell (too few repeated phones in one context: a small dev set) is None."""
    from fastabx import EmptyTaskError, zerospeech_abx  # Python >= 3.12; imported where used

    with tempfile.TemporaryDirectory(prefix="abx-") as root:
        for utterance, frames in features.items():
            torch.save(frames.detach().float().cpu().contiguous(), Path(root) / f"{utterance}.pt")
        errors: dict[str, float | None] = {}
        for mode in SPEAKER_MODES:
            try:
                error = zerospeech_abx(
                    item, root, max_size_group=MAX_SIZE_GROUP, max_x_across=MAX_X_ACROSS, speaker=mode,
                    context="within", distance="angular", frequency=frequency, seed=seed, device="cpu",
                    progress=False,
                )  # fmt: skip
            except EmptyTaskError:
                errors[mode] = None
                continue
            errors[mode] = 100.0 * error
        return errors


@torch.no_grad()
def layer_features(
    encoder: nn.Module, batches: Iterable, device: torch.device, only_layer: int | None = None
) -> list[dict[str, Tensor]]:
    """Per transformer layer, every utterance's unmasked output frames (T', D), from ``encoder``'s
    ``extract_features`` (a ``HubertEncoder``) over ``batches`` of waveform frames (training.loaders).
    ``only_layer`` (1-based): that layer alone (a one-element list), the deeper ones never computed."""
    encoder.eval()
    layers: list[dict[str, Tensor]] = []
    for batch in batches:
        if len(batch) == 0:
            continue
        outputs, lengths = encoder.extract_features(
            batch.features.to(device), batch.feature_lengths.to(device), num_layers=only_layer
        )  # [(B, T', D)] * layers, (B,)
        if only_layer is not None:
            outputs = outputs[-1:]
        if not layers:
            layers = [{} for _ in outputs]
        for layer, output in zip(layers, outputs, strict=True):
            for row, utterance in enumerate(batch.ids):
                layer[utterance] = output[row, : int(lengths[row])].float().cpu()
    return layers


__all__ = ["MAX_SIZE_GROUP", "MAX_X_ACROSS", "SPEAKER_MODES", "abx_errors", "layer_features"]
