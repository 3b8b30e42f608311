"""Decoder queries for Paraformer from an alignment instead of CIF: the reference trainer's
``--paraformer-alignment-mode viterbi|uniform|greedy``.

Each mode assigns encoder frames to tokens; a token's query is the plain average of its frames. Rows are
(B, U_max, D), zero past each row's token count, with U_max >= 1 (a batch without tokens gets one zero column,
as ``models/cif.py`` does).

  uniform  token j of U gets frames [floor(j*T/U), floor((j+1)*T/U)) of the T real frames: every token gets at
           least one frame when T >= U. When T < U there are too few frames: token j gets the single frame
           floor(j*T/U), frames are shared by neighbouring tokens, and no token is dropped.
  viterbi  CTC forced alignment of the reference (``torchaudio.functional.forced_align``, one row at a time):
           token j's frames are those where the best path emits it (repeats included; blank frames belong to no
           token), so every token gets at least one frame. A row that cannot be aligned (T < U + the number of
           adjacent repeated tokens, which CTC needs for the blanks between them) uses the uniform split
           instead; a warning says how many rows did.
  greedy   the CTC greedy path's segments, repeats merged and blanks dropped: one token per segment, needs no
           reference. Also returns the segments' token ids and counts.

A row with no frames at all (length 0) gets zero queries for its tokens; the tokens stay.
Alignments carry no gradient; the queries do, through the encoder frames.

Dimension legend: B batch, T frames, D width, C CTC classes (blank included), U tokens.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import Tensor

from asr_pipeline.modules.forced_alignment import forced_paths, min_frames

log = logging.getLogger(__name__)
_unalignable_rows = 0  # rows viterbi_queries could not align, in this process


def average_frames(hidden: Tensor, membership: Tensor) -> Tensor:
    """(B, U, D) mean of the frames of each token; ``membership`` (B, U, T) bool; tokens with no frame get 0."""
    weights = membership.to(hidden.dtype)  # (B, U, T)
    return torch.bmm(weights, hidden) / weights.sum(-1, keepdim=True).clamp_min(1.0)


def uniform_membership(lengths: Tensor, token_lengths: Tensor, frames: int) -> Tensor:
    """(B, U_max, T) bool: the uniform split of each row's ``lengths`` frames among its ``token_lengths`` tokens."""
    columns = max(1, int(token_lengths.max())) if token_lengths.numel() else 1
    token = torch.arange(columns, device=lengths.device)[None, :]  # (1, U)
    num_frames, num_tokens = lengths.long()[:, None], token_lengths.long()[:, None].clamp_min(1)  # (B, 1)
    first = torch.div(token * num_frames, num_tokens, rounding_mode="floor")  # (B, U)
    end = torch.div((token + 1) * num_frames, num_tokens, rounding_mode="floor")
    end = torch.maximum(end, first + 1)  # T < U: one (shared) frame per token
    time = torch.arange(frames, device=lengths.device)[None, None, :]  # (1, 1, T)
    inside = (time >= first[..., None]) & (time < end[..., None])  # (B, U, T)
    real = (time < num_frames[..., None]) & (token < token_lengths[:, None])[..., None]
    return inside & real


def path_segments(path: Tensor, blank: int) -> tuple[Tensor, Tensor, Tensor]:
    """Split CTC paths (B, T) (blank at padding) into tokens: runs of one non-blank label.

    Returns (membership (B, U_max, T) bool, token_ids (B, U_max) int64 padded with 0 as the batch targets
    are, token_lengths (B,) int64). A label repeated across a blank ("a _ a") is two tokens.
    """
    emitting = path != blank  # (B, T)
    previous = F.pad(path, (1, 0), value=blank)[:, :-1]
    starts = emitting & (path != previous)  # (B, T) first frame of each segment
    segment = torch.cumsum(starts.long(), dim=1) - 1  # (B, T) the segment each frame belongs to
    token_lengths = starts.sum(1)  # (B,)
    columns = max(1, int(token_lengths.max())) if token_lengths.numel() else 1
    token = torch.arange(columns, device=path.device)[None, :, None]  # (1, U, 1)
    membership = emitting[:, None, :] & (segment[:, None, :] == token)  # (B, U, T)
    token_ids = torch.zeros(path.size(0), columns, dtype=torch.long, device=path.device)
    rows, frames = starts.nonzero(as_tuple=True)
    token_ids[rows, segment[rows, frames]] = path[rows, frames].long()
    return membership, token_ids, token_lengths


def uniform_queries(hidden: Tensor, lengths: Tensor, token_lengths: Tensor) -> Tensor:
    """(B, U_max, D) queries: each row's frames split evenly among its tokens (rounding in the module doc)."""
    return average_frames(hidden, uniform_membership(lengths, token_lengths, hidden.size(1)))


def viterbi_queries(
    hidden: Tensor,
    lengths: Tensor,
    ctc_log_probs: Tensor,
    targets: Tensor,
    target_lengths: Tensor,
    blank: int,
) -> Tensor:
    """(B, U_max, D) queries from the CTC forced alignment of ``targets`` (B, U) on ``ctc_log_probs`` (B, T, C).

    Rows that cannot be aligned fall back to the uniform split (module doc). Raises ValueError for a target
    that contains the blank id.
    """
    batch, frames = ctc_log_probs.shape[:2]
    paths, aligned, _ = forced_paths(ctc_log_probs, lengths, targets, target_lengths, blank)
    unalignable = [
        (row, int(lengths[row]), int(target_lengths[row]))
        for row in (~aligned & (target_lengths.to(aligned.device) > 0)).nonzero().flatten().tolist()
    ]
    membership, _, token_counts = path_segments(paths, blank)
    columns = max(1, int(target_lengths.max())) if target_lengths.numel() else 1
    membership = F.pad(membership, (0, 0, 0, columns - membership.size(1)))  # (B, U_max, T)
    if unalignable:
        fallback = torch.zeros(batch, dtype=torch.bool, device=membership.device)
        fallback[[row for row, *_ in unalignable]] = True
        uniform = uniform_membership(
            lengths.to(membership.device), target_lengths.to(membership.device), frames
        )
        membership = torch.where(fallback[:, None, None], uniform, membership)
        token_counts = torch.where(fallback, target_lengths.to(token_counts), token_counts)
        row, num_frames, num_tokens = unalignable[0]
        repeats = min_frames(targets[row, :num_tokens]) - num_tokens
        global _unalignable_rows
        _unalignable_rows += len(unalignable)
        # Once per process at warning level (a training run would repeat it every few batches), then debug.
        log.log(
            logging.WARNING if _unalignable_rows == len(unalignable) else logging.DEBUG,
            "viterbi_queries: %d of %d rows have too few frames to CTC-align (e.g. row %d: %d frames < %d tokens "
            "+ %d repeats); their queries use the uniform split (%d rows so far in this process; later batches "
            "log at debug level)",
            len(unalignable),
            batch,
            row,
            num_frames,
            num_tokens,
            repeats,
            _unalignable_rows,
        )
    if not torch.equal(token_counts.cpu(), target_lengths.long().cpu()):
        raise RuntimeError(
            f"viterbi_queries: the forced alignment gave {token_counts.tolist()} tokens for targets of "
            f"{target_lengths.tolist()}; a CTC path emits every target token once, so this is a bug"
        )
    return average_frames(hidden, membership)


def greedy_queries(
    hidden: Tensor, lengths: Tensor, ctc_log_probs: Tensor, blank: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Queries from the CTC greedy path's segments: (queries (B, U_max, D), token_ids (B, U_max) int64 padded
    with 0, token_lengths (B,) int64)."""
    with torch.no_grad():
        path = ctc_log_probs.argmax(-1)  # (B, T)
        real = torch.arange(path.size(1), device=path.device) < lengths[:, None].to(path.device)
        path = torch.where(real, path, blank)
        membership, token_ids, token_lengths = path_segments(path, blank)
    return average_frames(hidden, membership), token_ids, token_lengths
