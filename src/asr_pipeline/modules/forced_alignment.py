"""CTC forced alignment of reference tokens (torchaudio's Viterbi, ``functional.forced_align``), for a batch.

``forced_paths`` gives each utterance's best frame labelling that collapses to its reference: a (B, T')
path of token ids with ``blank`` between and around tokens. torchaudio aligns one utterance at a time (batch 1),
so this loops over the batch. An utterance whose frames cannot hold its tokens -- one frame per token plus one
blank between each repeated pair -- has no alignment: its row stays all blank and ``aligned`` says so, so a
caller counts it and decides (Paraformer's queries fall back to a uniform split, its boundary loss leaves it
out, the alignment stage skips it with its id). The paths are computed without gradients, in float32 on the
log-probs' device.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchaudio.functional import forced_align


def min_frames(tokens: Tensor) -> int:
    """The fewest frames a CTC path of ``tokens`` (U,) needs: one per token, one blank per repeated pair."""
    count = int(tokens.numel())
    return count + (int((tokens[1:] == tokens[:-1]).sum()) if count > 1 else 0)


@torch.no_grad()
def forced_paths(
    log_probs: Tensor, lengths: Tensor, targets: Tensor, target_lengths: Tensor, blank: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Viterbi paths of ``targets`` (B, U) in ``log_probs`` (B, T', V); ``lengths`` (B,) frames, ``target_lengths``
    (B,) tokens. Returns (paths (B, T') int64, blank past each length and in unaligned rows; aligned (B,)
    bool; scores (B,) float32, the path's summed log-probability, -inf where unaligned). Raises ValueError for
    a target holding the blank id."""
    batch, frames = log_probs.shape[:2]
    device = log_probs.device
    paths = torch.full((batch, frames), blank, dtype=torch.long, device=device)
    aligned = torch.zeros(batch, dtype=torch.bool, device=device)
    scores = torch.full((batch,), float("-inf"), dtype=torch.float32, device=device)
    for row in range(batch):
        num_frames, num_tokens = int(lengths[row]), int(target_lengths[row])
        tokens = targets[row, :num_tokens].long().to(device)
        if num_tokens == 0:
            continue
        if bool((tokens == blank).any()):
            raise ValueError(
                f"forced alignment: row {row}'s target contains the blank id {blank} at token "
                f"{int((tokens == blank).nonzero()[0])}; targets must hold real tokens only"
            )
        if num_frames < min_frames(tokens):
            continue
        path, frame_scores = forced_align(
            log_probs[row : row + 1, :num_frames].float(), tokens[None].int(), blank=blank
        )
        paths[row, :num_frames] = path[0].to(device)
        aligned[row] = True
        scores[row] = frame_scores[0].sum()
    return paths, aligned, scores


__all__ = ["forced_paths", "min_frames"]
