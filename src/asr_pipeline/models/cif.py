"""Continuous Integrate-and-Fire (Dong & Xu, 2020, "CIF: Continuous Integrate-and-Fire for End-to-End
Speech Recognition", arXiv:1905.11235) and Paraformer's CIF predictor (Gao et al., 2022, arXiv:2206.08317;
FunASR ``funasr/models/paraformer/cif_predictor.py``: ``CifPredictorV2``, ``cif``, ``cif_v1``).

Every encoder frame t carries a weight alpha_t >= 0. Walking along time, the weights are integrated; each
time the integral crosses a multiple of ``threshold`` a token fires. A token's embedding is the
alpha-weighted sum of the frames that filled it, the firing frame split in two: the share that completes the
token goes to it, the rest starts the next one. The unfinished remainder after the last fire is dropped.

Numerics, and where they differ from FunASR:
  * Cumulative sums are float64 (``token_positions``). FunASR's first ``cif`` integrated in float32 and
    mis-counted tokens on long inputs (10k frames of 0.1 drift by ~0.1 token); ``cif_v1`` sums in float64
    and casts back to float32.
  * A cumulative sum within a relative ``SNAP_RTOL`` = 2^-22 (about 2.4e-7) of a whole number of tokens counts
    as that whole number. Weights stored in float32 carry a representation error of at most 2^-24 of their
    sum, so weights meant to sum to an integer (0.7 ten times, 0.9 + 0.1) give exactly that many tokens.
    FunASR's float32 cast rounds by up to 2^-24 instead, which is enough for 0.9 + 0.1 but not for 0.7 x 10.
  * A frame whose weight spans several thresholds fires several tokens (weights above the threshold happen
    after scaling to the target length when U > T / 2); FunASR fires at most one token per frame.
  * The embeddings are gathered piece by piece (``index_add``) rather than as differences of a float32
    prefix sum of alpha * hidden (``cif_v1``), so long inputs lose no precision.

Dimension legend: B batch, T frames, D width, U tokens.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SNAP_RTOL = 2.0**-22  # 4x float32's worst-case relative representation error of a sum of positive weights


def token_positions(alphas: Tensor, threshold: float = 1.0) -> Tensor:
    """How many tokens have been integrated after each frame: cumsum(alphas) / threshold, in float64.

    Values within ``SNAP_RTOL`` (relative) of a whole number are snapped onto it; the snap is added as a
    constant, so gradients pass through unchanged. Returns (B, T) float64, non-decreasing along T.
    """
    positions = torch.cumsum(alphas.double(), dim=1) / threshold  # (B, T)
    exact = positions.detach()
    nearest = exact.round()
    snap = (exact - nearest).abs() <= SNAP_RTOL * nearest.clamp_min(1.0)
    return positions + torch.where(snap, nearest - exact, 0.0)


def fire_counts(alphas: Tensor, threshold: float = 1.0) -> Tensor:
    """(B, T) int64: the number of tokens that fire at each frame (0 or 1 for weights below the threshold).

    FunASR calls this the CIF peak; the frame where a token fires is where its integral reaches the threshold.
    """
    whole = token_positions(alphas, threshold).detach().floor()  # (B, T)
    return torch.diff(whole, dim=1, prepend=torch.zeros_like(whole[:, :1])).long()


def cif(hidden: Tensor, alphas: Tensor, threshold: float = 1.0) -> tuple[Tensor, Tensor]:
    """Integrate-and-fire ``hidden`` (B, T, D) with weights ``alphas`` (B, T) into token embeddings.

    ``alphas`` must be >= 0 and already zero at padded frames. Returns ``(embeddings, token_counts)``:
    embeddings (B, U_max, D) in ``hidden``'s dtype, zero past each row's count, and token_counts (B,) int64,
    the number of complete tokens (floor of the snapped total weight / threshold). U_max is the largest
    count, but at least 1: a batch in which nothing fires gets one all-zero column (counts stay 0), so
    downstream attention never sees an empty query axis.
    """
    if hidden.dim() != 3 or alphas.shape != hidden.shape[:2]:
        raise ValueError(
            f"cif: expected hidden (B, T, D) and alphas (B, T), got {tuple(hidden.shape)} and {tuple(alphas.shape)}"
        )
    if threshold <= 0:
        raise ValueError(f"cif: threshold must be > 0, got {threshold}")
    if alphas.numel() and not bool(((alphas >= 0) & torch.isfinite(alphas)).all()):
        raise ValueError(
            "cif: alphas must be finite and >= 0 (a NaN here usually means the encoder diverged); "
            f"found min {alphas.min().item()}, max {alphas.max().item()}"
        )
    batch, frames, dim = hidden.shape
    if frames == 0:
        return hidden.new_zeros(batch, 1, dim), torch.zeros(batch, dtype=torch.long, device=hidden.device)

    ends = token_positions(alphas, threshold)  # (B, T) where each frame's weight ends on the token axis
    starts = F.pad(ends, (1, 0))[:, :-1]  # (B, T) and where it starts
    token_counts = ends[:, -1].detach().floor().long()  # (B,)
    max_tokens = max(1, int(token_counts.max()))

    # A frame's weight covers [start, end) on the token axis; cut it at every whole number it crosses: one
    # piece per token it touches (two where a token fires inside the frame, more if alpha > threshold).
    first_token = starts.detach().floor()  # (B, T)
    pieces_per_frame = torch.where(ends.detach() > starts.detach(), ends.detach().ceil() - first_token, 0)
    pieces_per_frame = pieces_per_frame.long().flatten()  # (B*T,)
    frame_of_piece = torch.repeat_interleave(pieces_per_frame)  # (P,) flat frame index of each piece
    first_piece = torch.cumsum(pieces_per_frame, 0) - pieces_per_frame  # (B*T,)
    rank = torch.arange(frame_of_piece.numel(), device=hidden.device) - first_piece[frame_of_piece]  # (P,)
    token = first_token.flatten()[frame_of_piece] + rank  # (P,) float64, whole numbers
    low = torch.maximum(starts.flatten()[frame_of_piece], token)
    high = torch.minimum(ends.flatten()[frame_of_piece], token + 1)
    weight = (high - low) * threshold  # (P,) the share of the frame's alpha that goes to this token

    row = torch.div(frame_of_piece, frames, rounding_mode="floor")  # (P,)
    token = token.long()
    complete = token < token_counts[row]  # the unfinished remainder after the last fire is dropped
    frame_of_piece, row, token, weight = (
        frame_of_piece[complete],
        row[complete],
        token[complete],
        weight[complete],
    )
    values = weight.to(hidden.dtype)[:, None] * hidden.reshape(batch * frames, dim)[frame_of_piece]  # (P, D)
    embeddings = hidden.new_zeros(batch * max_tokens, dim).index_add(0, row * max_tokens + token, values)
    return embeddings.view(batch, max_tokens, dim), token_counts


class CIFOutput(NamedTuple):
    """What ``CIFPredictor`` returns.

    alphas: (B, T) the weights CIF integrated, zero at padding; scaled to the target length when one is given.
    quantity: (B,) unscaled sum of the weights over real frames, in tokens (divided by the threshold, 1 by
        default): the predicted token count that the quantity loss pulls towards U.
    embeddings: (B, U_max, D) float32 token embeddings, zero past each row's token_lengths (U_max >= 1).
    token_lengths: (B,) int64 tokens per row: the target lengths when given, else the fired count.
    """

    alphas: Tensor
    quantity: Tensor
    embeddings: Tensor
    token_lengths: Tensor


class CIFPredictor(nn.Module):
    """Paraformer's CIF predictor: per-frame weights from a conv over time, then integrate-and-fire.

    alpha = sigmoid(Linear(dropout(ReLU(Conv1d(hidden))))), as FunASR's CifPredictorV2 (whose dropout is built
    but never applied; ours is applied to the conv features, as CifPredictor v1 does). The conv is a plain
    Conv1d(dim, dim, kernel_size) with (k-1)//2 zeros on the left and k//2 on the right (FunASR's l_order = r_order
    = 1 for k = 3), and it reads zeros past each utterance's end, so a padded batch equals each utterance alone.

    With ``target_lengths`` (training, and the validation loss) the weights are scaled so each row sums to
    U * threshold (Paraformer, sec. 3.2) and exactly U tokens fire: the scaling runs in float64 and the snap in
    ``token_positions`` absorbs float32 rounding; should a row still come out short (only when its weights are
    all ~0, e.g. a diverged encoder), the missing weight is put on an all-zero frame after its last real frame,
    so the partial last token fires and any further missing tokens are zero vectors. Embeddings are cut or
    zero-padded to max(U) columns.

    Without ``target_lengths`` (decoding), FunASR's tail rule: ``tail_threshold`` of weight on an all-zero frame
    after each utterance's last frame, so a last token that is at least 1 - tail_threshold complete still fires.
    """

    def __init__(
        self,
        dim: int,
        kernel_size: int = 3,
        threshold: float = 1.0,
        tail_threshold: float = 0.45,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.threshold = threshold
        self.tail_threshold = tail_threshold
        self.padding = ((kernel_size - 1) // 2, kernel_size // 2)
        self.conv = nn.Conv1d(dim, dim, kernel_size)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(dim, 1)

    def frame_weights(self, hidden: Tensor, lengths: Tensor) -> Tensor:
        """(B, T) alphas in (0, 1) at real frames, 0 at padding."""
        mask = torch.arange(hidden.size(1), device=hidden.device) < lengths[:, None]  # (B, T)
        x = (hidden * mask[..., None]).transpose(1, 2)  # (B, D, T)
        x = torch.relu(self.conv(F.pad(x, self.padding))).transpose(1, 2)  # (B, T, D)
        return torch.sigmoid(self.output(self.dropout(x))).squeeze(-1) * mask

    def forward(self, hidden: Tensor, lengths: Tensor, target_lengths: Tensor | None = None) -> CIFOutput:
        # FunASR runs the predictor outside autocast too: bf16 weights would mis-count tokens.
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            hidden = hidden.float()
            alphas = self.frame_weights(hidden, lengths)  # (B, T)
            quantity = alphas.sum(1) / self.threshold  # (B,)
            if target_lengths is None:
                tail = torch.full_like(quantity, self.tail_threshold, dtype=torch.float64)
            else:
                wanted = target_lengths.to(torch.float64) * self.threshold  # (B,)
                scale = wanted / alphas.sum(1).double().clamp_min(1e-12)
                alphas = (alphas.double() * scale[:, None]).to(alphas.dtype)
                tail = (wanted - alphas.double().sum(1)).clamp_min(0.0)
            mask = torch.arange(hidden.size(1), device=hidden.device) < lengths[:, None]  # (B, T)
            padded_hidden = F.pad(
                hidden * mask[..., None], (0, 0, 0, 1)
            )  # (B, T+1, D) zero from each length on
            tailed_alphas = F.pad(alphas, (0, 1)).scatter_add(
                1, lengths[:, None].long(), tail.to(alphas.dtype)[:, None]
            )  # (B, T+1) the tail weight sits on the first frame past each utterance
            embeddings, token_lengths = cif(padded_hidden, tailed_alphas, self.threshold)
            if target_lengths is not None:
                embeddings = _fit_to_lengths(embeddings, target_lengths)
                token_lengths = target_lengths.long()
        return CIFOutput(alphas, quantity, embeddings, token_lengths)


def _fit_to_lengths(embeddings: Tensor, lengths: Tensor) -> Tensor:
    """Cut or zero-pad (B, U, D) to max(1, max(lengths)) columns and zero every column past its row's length."""
    columns = max(1, int(lengths.max())) if lengths.numel() else 1
    embeddings = F.pad(embeddings, (0, 0, 0, max(0, columns - embeddings.size(1))))[:, :columns]
    keep = torch.arange(columns, device=embeddings.device) < lengths[:, None]  # (B, U)
    return embeddings * keep[..., None]


def quantity_loss(quantity: Tensor, target_lengths: Tensor) -> Tensor:
    """(B,) |quantity - U|: Paraformer's MAE loss between the predicted and the true token count."""
    return (quantity - target_lengths.to(quantity.dtype)).abs()
