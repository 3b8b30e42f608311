"""The SpeechAligner's frame-phone and word-boundary heads, trained from its own CTC forced alignments.

CTC training teaches the aligner's CTC head only; its frame head (a phone class per frame) and boundary head (the
probability that a word starts at a frame) need frame labels. The CTC-trained aligner gives them: the Viterbi path
of each utterance's canonical phones (``modules.forced_alignment``) marks the frames where the model commits to
each phone, and the known words (``word_phones`` of the pron_phones stage) say which phones start a word.

Frame labels from a path (``frame_labels``):

    frames before the first phone's first frame          SIL (the leading pause)
    phone i, from its first frame to phone i+1's first    phone i (the blank frames after a CTC spike belong to the
                                                          phone the spike named)
    the last phone, from its first frame for as long      its id; SIL after (the trailing pause: the path has no
    as the utterance's median phone lasts (at least       next phone to end it)
    its own spike)
    boundary target                                       1 at the first frame of each word's first phone, else 0

The trunk stays frozen (its hidden states and CTC outputs are what GOP and the scoring head read; they do not
move), and the two heads (a linear layer per frame; a k=3 convolution for the boundary) learn on its hidden
states: cross-entropy for the frames, binary cross-entropy with the boundary class weighted by how rare it is
(``pos_weight`` w = non-boundary / boundary frames of the training set). So ``heads().boundary`` is the probability
of a word start as if starts and other frames were equally common (the weighting shifts the logit by log w); a
decision at 0.5 on it, among the peaks, is a balanced one. (Taking log w off the bias instead, for the true class
balance, was tried: a word start's probability spreads over the few frames around it, none then reaches 0.5, and
recall on the synthetic test fell from ~0.65 to 0.05.) The labels are computed once; the hidden states are recomputed per batch (a corpus' states do not fit in
memory). ``evaluate_heads`` scores held-out utterances against their own forced-alignment labels: frame accuracy,
and boundary precision / recall / F1 where a predicted boundary is a frame whose probability is above 0.5 and the
highest within ``peak_radius_frames`` either side, and counts as a hit within ``tolerance_frames`` of an unmatched
true boundary. Where the true word starts are known (the demo corpus: espeak-ng's own word events,
``demo.phones``), ``score_word_starts`` scores the forced alignment's and the head's against them.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from asr_pipeline.models.registry import build_from_config
from asr_pipeline.models.speech_aligner import SpeechAligner
from asr_pipeline.modules.forced_alignment import forced_paths
from asr_pipeline.options import options_from_dict
from asr_pipeline.pron.gop import phone_segments
from asr_pipeline.text.phones import BLANK_ID, SILENCE_ID


@dataclass(frozen=True)
class HeadOptions:
    """params.yaml ``pron.aligners.<name>.heads``."""

    epochs: int = 3
    batch_size: int = 16  # utterances per optimizer step
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    tolerance_frames: int = 2  # a predicted word start within this many frames of a true one is a hit (20 ms)
    peak_radius_frames: int = 5  # a predicted word start is the highest probability within this many frames
    jobs: int = 1  # processes resynthesizing the test split for its true word starts (the demo corpus)
    seed: int = 0

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> HeadOptions:
        return options_from_dict(cls, dict(raw or {}), "params.yaml pron.aligners.<name>.heads")


@dataclass
class HeadExample:
    id: str
    features: Tensor  # (T, F)
    phones: list[int]  # canonical phone ids, in order
    phones_per_word: list[int]


@dataclass
class FrameTargets:
    labels: Tensor  # (T,) int64 phone ids (SIL for the pauses)
    boundaries: Tensor  # (T,) float32: 1 where a word starts


def frame_labels(path: Sequence[int], phones_per_word: Sequence[int], blank: int = BLANK_ID) -> FrameTargets:
    """Frame and boundary targets from one utterance's forced CTC path (module docstring)."""
    frames = len(path)
    segments = phone_segments(path, blank)
    if sum(phones_per_word) != len(segments):
        raise ValueError(f"{sum(phones_per_word)} phones in the words but {len(segments)} in the path")
    labels = torch.full((frames,), SILENCE_ID, dtype=torch.long)
    boundaries = torch.zeros(frames)
    if not segments:
        return FrameTargets(labels, boundaries)
    starts = [start for _, start, _ in segments]
    for (phone, start, _), end in zip(segments, starts[1:], strict=False):
        labels[start:end] = phone
    durations = [b - a for a, b in itertools.pairwise(starts)]
    phone, start, spike_end = segments[-1]
    tail = round(statistics.median(durations)) if durations else spike_end - start
    labels[start : min(frames, max(spike_end, start + tail))] = phone
    first = 0
    for count in phones_per_word:
        if count:
            boundaries[starts[first]] = 1.0
        first += count
    return FrameTargets(labels, boundaries)


def _padded(examples: Sequence[HeadExample]) -> tuple[Tensor, Tensor]:
    lengths = torch.tensor([e.features.shape[0] for e in examples])
    return pad_sequence([e.features for e in examples], batch_first=True), lengths


@torch.no_grad()
def alignment_targets(
    model: SpeechAligner, examples: Sequence[HeadExample], batch_size: int = 16
) -> list[FrameTargets | None]:
    """Each example's targets from the model's forced alignment of its phones; None where its frames cannot hold
    its phones (the caller counts those)."""
    model.eval()
    targets: list[FrameTargets | None] = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        features, lengths = _padded(batch)
        log_probs, out_lengths = model(features, lengths)  # (B, T, V), (B,)
        phones = torch.zeros(len(batch), max(len(e.phones) for e in batch), dtype=torch.long)
        for row, example in enumerate(batch):
            phones[row, : len(example.phones)] = torch.tensor(example.phones)
        counts = torch.tensor([len(e.phones) for e in batch])
        paths, aligned, _ = forced_paths(log_probs, out_lengths, phones, counts, BLANK_ID)
        for row, example in enumerate(batch):
            if not bool(aligned[row]) or not example.phones:
                targets.append(None)
                continue
            path = paths[row, : int(out_lengths[row])].tolist()
            targets.append(frame_labels(path, example.phones_per_word))
    return targets


def _head_outputs(model: SpeechAligner, batch: Sequence[HeadExample]) -> tuple[Tensor, Tensor, Tensor]:
    """Frame logits (B, T, V), boundary logits (B, T) and the valid-frame mask (B, T) of a batch; the trunk runs
    without gradients."""
    features, lengths = _padded(batch)
    with torch.no_grad():
        hidden, lengths = model.encode(features, lengths)  # (B, T, D)
    valid = torch.arange(hidden.shape[1])[None, :] < lengths[:, None]
    return model.phone_head(hidden), model.boundary_logits(hidden, lengths), valid


def _stacked(targets: Sequence[FrameTargets], width: int) -> tuple[Tensor, Tensor]:
    labels = torch.full((len(targets), width), -100, dtype=torch.long)  # -100: cross-entropy's ignore index
    boundaries = torch.zeros(len(targets), width)
    for row, target in enumerate(targets):
        labels[row, : target.labels.shape[0]] = target.labels
        boundaries[row, : target.boundaries.shape[0]] = target.boundaries
    return labels, boundaries


def peaks(probabilities: Tensor, threshold: float = 0.5, radius: int = 5) -> list[int]:
    """The predicted word starts: frames where ``probabilities`` (T,) is above ``threshold`` and the highest within
    ``radius`` frames either side (the first of equal ones), so one word start is one peak however many frames
    near it the head rates high."""
    padded = F.pad(probabilities[None, None], (radius, radius), value=-1.0)
    windows = padded.unfold(-1, 2 * radius + 1, 1)[0, 0]  # (T, 2 * radius + 1): frame t's neighbourhood
    highest = windows.max(-1).values
    first = windows.argmax(-1) == radius  # argmax returns the first maximum: ties go to the earliest frame
    return torch.nonzero((probabilities > threshold) & (probabilities >= highest) & first).flatten().tolist()


def matched_boundaries(
    predicted: Sequence[int], true: Sequence[int], tolerance: int
) -> list[tuple[int, int]]:
    """(predicted, true) pairs within ``tolerance`` frames: each prediction, in time order, takes the nearest true
    boundary not taken yet."""
    used = [False] * len(true)
    pairs = []
    for frame in predicted:
        candidates = [
            (abs(frame - t), i) for i, t in enumerate(true) if not used[i] and abs(frame - t) <= tolerance
        ]
        if candidates:
            index = min(candidates)[1]
            used[index] = True
            pairs.append((frame, true[index]))
    return pairs


def boundary_hits(predicted: Sequence[int], true: Sequence[int], tolerance: int) -> int:
    """How many predictions match a distinct true boundary within ``tolerance`` frames (``matched_boundaries``)."""
    return len(matched_boundaries(predicted, true, tolerance))


def _rates(hits: int, predicted: int, true: int) -> dict[str, float]:
    precision = hits / predicted if predicted else 0.0
    recall = hits / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


@torch.no_grad()
def evaluate_heads(
    model: SpeechAligner,
    examples: Sequence[HeadExample],
    targets: Sequence[FrameTargets | None],
    options: HeadOptions,
) -> dict[str, Any]:
    """Frame accuracy and boundary precision / recall / F1 (module docstring) over the examples with targets."""
    model.eval()
    pairs = [(e, t) for e, t in zip(examples, targets, strict=True) if t is not None]
    correct = frames = hits = predicted_count = true_count = 0
    for start in range(0, len(pairs), options.batch_size):
        batch = pairs[start : start + options.batch_size]
        logits, boundary_logits, valid = _head_outputs(model, [e for e, _ in batch])
        for row, (_, target) in enumerate(batch):
            length = int(valid[row].sum())
            correct += int((logits[row, :length].argmax(-1) == target.labels).sum())
            frames += length
            predicted = peaks(torch.sigmoid(boundary_logits[row, :length]), radius=options.peak_radius_frames)
            true = torch.nonzero(target.boundaries).flatten().tolist()
            hits += boundary_hits(predicted, true, options.tolerance_frames)
            predicted_count += len(predicted)
            true_count += len(true)
    return {
        "utterances": len(pairs),
        "frame_accuracy": round(correct / max(frames, 1), 4),
        "boundary": {
            **_rates(hits, predicted_count, true_count),
            "tolerance_frames": options.tolerance_frames,
            "true": true_count,
            "predicted": predicted_count,
        },
    }


@torch.no_grad()
def score_word_starts(
    model: SpeechAligner,
    examples: Sequence[HeadExample],
    truth: Mapping[str, Sequence[int]],
    options: HeadOptions,
) -> dict[str, Any]:
    """Word starts against the true ones (``truth``: frames by utterance id; the synthesizer's for the demo
    corpus): the forced alignment's (the heads' training targets) and the boundary head's peaks, each with precision
    / recall / F1 within ``tolerance_frames`` and the median signed distance (frames; positive: late) from each
    predicted start to the nearest true one, matched or not."""
    chosen = [e for e in examples if e.id in truth]
    pairs = [
        (e, t)
        for e, t in zip(chosen, alignment_targets(model, chosen, options.batch_size), strict=True)
        if t is not None
    ]
    counts = {"forced_alignment": [0, 0], "head": [0, 0]}  # hits, predictions
    offsets: dict[str, list[int]] = {"forced_alignment": [], "head": []}
    true_count = 0
    for start in range(0, len(pairs), options.batch_size):
        batch = pairs[start : start + options.batch_size]
        _, boundary_logits, valid = _head_outputs(model, [e for e, _ in batch])
        for row, (example, target) in enumerate(batch):
            true = list(truth[example.id])
            length = int(valid[row].sum())
            predictions = {
                "forced_alignment": torch.nonzero(target.boundaries).flatten().tolist(),
                "head": peaks(
                    torch.sigmoid(boundary_logits[row, :length]), radius=options.peak_radius_frames
                ),
            }
            for name, predicted in predictions.items():
                counts[name][0] += len(matched_boundaries(predicted, true, options.tolerance_frames))
                counts[name][1] += len(predicted)
                if true:
                    offsets[name].extend(min((p - t for t in true), key=abs) for p in predicted)
            true_count += len(true)
    result: dict[str, Any] = {
        "utterances": len(pairs),
        "true": true_count,
        "tolerance_frames": options.tolerance_frames,
    }
    for name, (hits, predicted) in counts.items():
        median = statistics.median(offsets[name]) if offsets[name] else None
        result[name] = {
            **_rates(hits, predicted, true_count),
            "predicted": predicted,
            "median_offset_frames": median,
        }
    return result


def train_heads(
    model: SpeechAligner,
    train: Sequence[HeadExample],
    test: Sequence[HeadExample],
    options: HeadOptions,
) -> tuple[SpeechAligner, dict[str, Any]]:
    """A copy of ``model`` whose frame and boundary heads are trained on ``train``'s forced alignments (its trunk
    and CTC head unchanged), and the report: the heads on ``test`` before and after, per-epoch losses, and the
    utterances without an alignment."""
    torch.manual_seed(options.seed)
    model = copy.deepcopy(model)
    model.requires_grad_(False)
    heads = [*model.phone_head.parameters(), *model.boundary_head.parameters()]
    for parameter in heads:
        parameter.requires_grad_(True)
    train_targets = alignment_targets(model, train, options.batch_size)
    test_targets = alignment_targets(model, test, options.batch_size)
    fitting = [(e, t) for e, t in zip(train, train_targets, strict=True) if t is not None]
    if not fitting:
        raise ValueError(
            f"none of the {len(train)} training utterances could be force-aligned: the aligner's frames cannot "
            "hold their phones"
        )
    boundary_frames = sum(float(t.boundaries.sum()) for _, t in fitting)
    all_frames = sum(t.labels.shape[0] for _, t in fitting)
    pos_weight = torch.tensor((all_frames - boundary_frames) / max(boundary_frames, 1.0))
    before = evaluate_heads(model, test, test_targets, options)
    optimizer = torch.optim.AdamW(heads, lr=options.learning_rate, weight_decay=options.weight_decay)
    generator = torch.Generator().manual_seed(options.seed)
    history = []
    for epoch in range(options.epochs):
        order = torch.randperm(len(fitting), generator=generator).tolist()
        total, batches = 0.0, 0
        for start in range(0, len(order), options.batch_size):
            batch = [fitting[i] for i in order[start : start + options.batch_size]]
            logits, boundary_logits, valid = _head_outputs(model, [e for e, _ in batch])
            labels, boundaries = _stacked([t for _, t in batch], logits.shape[1])
            frame_loss = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
            boundary_loss = F.binary_cross_entropy_with_logits(
                boundary_logits[valid], boundaries[valid], pos_weight=pos_weight
            )
            loss = frame_loss + boundary_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach())
            batches += 1
        history.append({"epoch": epoch, "loss": round(total / max(batches, 1), 5)})
    model.requires_grad_(False)
    after = evaluate_heads(model, test, test_targets, options)
    return model, {
        "epochs": history,
        "train_utterances": len(fitting),
        "unaligned": {
            "train": sum(t is None for t in train_targets),
            "test": sum(t is None for t in test_targets),
        },
        "boundary_pos_weight": round(float(pos_weight), 3),
        "test_untrained": before,
        "test": after,
    }


ARCHITECTURE = "speech-aligner"


def save_aligner(model: SpeechAligner, path: str | Path) -> None:
    """The whole aligner (trunk and all three heads) as one safetensors file whose metadata holds its config,
    written to a temporary name and renamed, so a file under ``path`` is whole."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    config = json.dumps(dataclasses.asdict(model.config))
    save_file(state, tmp, metadata={"architecture": ARCHITECTURE, "model_config": config})
    tmp.replace(path)


def load_aligner(path: str | Path) -> SpeechAligner:
    """An aligner ``save_aligner`` wrote, in eval mode."""
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    if metadata.get("architecture") != ARCHITECTURE:
        raise ValueError(
            f"{path} holds no speech aligner (metadata architecture {metadata.get('architecture')!r})"
        )
    model = build_from_config(ARCHITECTURE, json.loads(metadata["model_config"]))
    model.load_state_dict(load_file(str(path)), strict=True)
    return model.eval()  # type: ignore[return-value]


__all__ = [
    "FrameTargets",
    "HeadExample",
    "HeadOptions",
    "alignment_targets",
    "boundary_hits",
    "evaluate_heads",
    "frame_labels",
    "load_aligner",
    "matched_boundaries",
    "peaks",
    "save_aligner",
    "score_word_starts",
    "train_heads",
]
