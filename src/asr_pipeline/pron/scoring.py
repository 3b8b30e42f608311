"""The scoring head: phone, word and utterance pronunciation scores from the aligner's representations.

    aligner (frozen unless ctc_weight > 0)      hidden (T, D), CTC log-probs (T, V)
    forced alignment of the canonical phones    one segment per phone (pron.gop)
    phone vector   [mean hidden over the segment; LPP; GOP]              -> phone MLP  -> score / 2    (0-2)
    word vector    mean of its phones' MLP features                      -> word MLP   -> score / 10   (0-10)
    utterance      mean of its words' vectors                            -> utt MLP    -> score / 10   (0-10)

Loss: mean squared error at each level (scores scaled to 0-1 so the levels weigh alike), plus ``ctc_weight`` times
the aligner's CTC loss on the canonical phones; the reference's lesson is that the CTC loss must be off (weight 0,
the default) while the head trains, so the aligner is frozen then and its features are computed once. Optimiser:
AdamW with linear warmup and cosine decay; the peak rate is ``learning_rate * batch_size / reference_batch_size``
(the linear scaling rule, Goyal et al. 2017; ``training.optimizers.batch_scaled_lr``, which the Trainer's
``optim.lr_scale_with_batch`` shares). Every epoch is scored on a validation part of the training set (cut by
utterance id) and the best epoch's weights are kept: the reference found the best checkpoint is rarely the last.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from asr_pipeline.options import options_from_dict
from asr_pipeline.pron.evaluation import correlations
from asr_pipeline.pron.gop import gop_scores
from asr_pipeline.pron.speechocean import ScoredUtterance
from asr_pipeline.text.phones import phone_ids
from asr_pipeline.training.optimizers import batch_scaled_lr

LEVELS = ("phone", "word", "utterance")
SCALES = {"phone": 2.0, "word": 10.0, "utterance": 10.0}  # SpeechOcean762's label ranges


@dataclass(frozen=True)
class ScoringOptions:
    """params.yaml ``pron.scoring``."""

    hidden: int = 64
    dropout: float = 0.1
    epochs: int = 15
    batch_size: int = 8  # utterances per optimizer step
    learning_rate: float = 1e-3  # at reference_batch_size; scaled linearly with batch_size
    reference_batch_size: int = 8
    weight_decay: float = 1e-4
    warmup_steps: int = 20
    ctc_weight: float = 0.0  # > 0: the aligner trains too, with its CTC loss on the canonical phones
    val_share: float = 0.2  # of the training utterances, by id: picks the best epoch
    seed: int = 0

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> ScoringOptions:
        return options_from_dict(cls, dict(raw or {}), "params.yaml pron.scoring")

    @property
    def peak_learning_rate(self) -> float:
        # The one implementation of the rule, shared with the Trainer's optim.lr_scale_with_batch.
        return batch_scaled_lr(self.learning_rate, self.batch_size, self.reference_batch_size)


@dataclass
class Example:
    """One scored utterance, ready for the head: its features and labels (the aligner's outputs are recomputed
    when it trains, cached otherwise)."""

    id: str
    features: Tensor  # (T, F)
    phones: list[int]  # canonical phone ids
    phones_per_word: list[int]
    phone_labels: list[float]  # 0-2
    word_labels: list[float]  # 0-10
    utterance_label: float  # 0-10
    audio_path: str = ""  # where the features came from: another encoder featurizes it its own way


def examples_from(
    utterances: Iterable[ScoredUtterance], featurize
) -> tuple[list[Example], list[tuple[str, str]]]:
    """``featurize(audio_path) -> (T, F) array or (None, reason)``; the examples and the (location, reason) of
    utterances left out."""
    examples, skipped = [], []
    for utterance in utterances:
        features, reason = featurize(utterance.audio_path)
        if features is None:
            skipped.append((utterance.location, reason))
            continue
        examples.append(
            Example(
                id=utterance.id,
                features=torch.as_tensor(features, dtype=torch.float32),
                phones=phone_ids([p for word in utterance.words for p in word.phones]),
                phones_per_word=[len(word.phones) for word in utterance.words],
                phone_labels=[float(s) for word in utterance.words for s in word.phone_accuracy],
                word_labels=[float(word.accuracy) for word in utterance.words],
                utterance_label=float(utterance.scores["accuracy"]),
                audio_path=utterance.audio_path,
            )
        )
    return examples, skipped


def validation_part(utterance_id: str, share: float) -> bool:
    digest = hashlib.sha256(f"scoring/{utterance_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def _mlp(width_in: int, hidden: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(width_in, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.GELU()
    )


GOP_SCALE = 5.0  # LPP and GOP run from about -10 to 0: scaled to about unit size beside the normalised states


class ScoringHead(nn.Module):
    def __init__(self, d_model: int, options: ScoringOptions) -> None:
        super().__init__()
        # The encoder's states can be large (a residual stream's): normalised, or the first layer saturates the
        # output sigmoids and the head never moves (the first real run stayed at rho ~0 until this).
        self.norm = nn.LayerNorm(d_model)
        self.phone_mlp = _mlp(d_model + 2, options.hidden, options.dropout)  # + LPP, GOP
        self.word_mlp = _mlp(options.hidden, options.hidden, options.dropout)
        self.utterance_mlp = _mlp(options.hidden, options.hidden, options.dropout)
        self.outputs = nn.ModuleDict({level: nn.Linear(options.hidden, 1) for level in LEVELS})

    def forward(self, phone_vectors: Tensor, phones_per_word: Sequence[int]) -> dict[str, Tensor]:
        """(P, D + 2) phone vectors of one utterance -> scores on a 0-1 scale (unbounded: a regression): phone (P,),
        word (W,), utterance (1,)."""
        states, gop = phone_vectors[:, :-2], phone_vectors[:, -2:] / GOP_SCALE  # (P, D), (P, 2)
        phone_hidden = self.phone_mlp(torch.cat([self.norm(states), gop], dim=-1))  # (P, H)
        words = torch.stack(
            [part.mean(0) for part in torch.split(phone_hidden, list(phones_per_word))]
        )  # (W, H)
        word_hidden = self.word_mlp(words)  # (W, H)
        utterance_hidden = self.utterance_mlp(word_hidden.mean(0, keepdim=True))  # (1, H)
        hidden = {"phone": phone_hidden, "word": word_hidden, "utterance": utterance_hidden}
        # Linear outputs: most labels sit at the top of the scale (a correct phone is 2 of 2), and a sigmoid chasing
        # exactly 1 saturates and stops every gradient (the first real run's head never moved).
        return {level: self.outputs[level](hidden[level]).squeeze(-1) for level in LEVELS}


Encoder = Callable[[Example], Tensor]  # an utterance -> another model's frame representations (T', D)


def phone_vectors(
    aligner: nn.Module, example: Example, encoder: Encoder | None = None
) -> tuple[Tensor, Tensor] | None:
    """(P, D + 2) phone vectors (module docstring) and the utterance's CTC log-probs (T, V); None when its frames
    cannot hold its phones. ``encoder``: pool another model's representations instead of the aligner's, over the
    same stretch of time (the aligner's segment frames mapped to the encoder's frame rate by the ratio of the two
    sequences' lengths)."""
    outputs = aligner.heads(example.features[None], torch.tensor([example.features.shape[0]]))
    log_probs = outputs.ctc_log_probs[0]  # (T, V)
    scores = gop_scores(log_probs.detach(), example.phones)
    if scores is None:
        return None
    hidden = outputs.hidden[0] if encoder is None else encoder(example)  # (T', D)
    ratio = hidden.shape[0] / log_probs.shape[0]
    rows = []
    for s in scores:
        start = min(int(s.start * ratio), hidden.shape[0] - 1)
        end = max(start + 1, min(math.ceil(s.end * ratio), hidden.shape[0]))
        rows.append(torch.cat([hidden[start:end].mean(0), hidden.new_tensor([s.lpp, s.gop])]))
    return torch.stack(rows), log_probs


def _targets(example: Example) -> dict[str, Tensor]:
    return {
        "phone": torch.tensor(example.phone_labels) / SCALES["phone"],
        "word": torch.tensor(example.word_labels) / SCALES["word"],
        "utterance": torch.tensor([example.utterance_label]) / SCALES["utterance"],
    }


def learning_rate(step: int, total_steps: int, options: ScoringOptions) -> float:
    """Linear warmup to the scaled peak, then cosine decay to 0."""
    peak = options.peak_learning_rate
    if step < options.warmup_steps:
        return peak * (step + 1) / options.warmup_steps
    progress = (step - options.warmup_steps) / max(1, total_steps - options.warmup_steps)
    return 0.5 * peak * (1 + math.cos(math.pi * min(1.0, progress)))


@torch.no_grad()
def predict(
    aligner: nn.Module,
    head: ScoringHead,
    examples: Sequence[Example],
    cached: dict[str, tuple[Tensor, Tensor] | None] | None = None,
) -> dict[str, tuple[list, list]]:
    """{level: (predicted, human)} on the label scales, over the examples that align (``cached``: the frozen
    aligner's phone vectors by utterance id, where computed already)."""
    aligner.eval()
    head.eval()
    pairs: dict[str, tuple[list, list]] = {level: ([], []) for level in LEVELS}
    for example in examples:
        vectors = cached[example.id] if cached is not None else phone_vectors(aligner, example)
        if vectors is None:
            continue
        scores, targets = head(vectors[0], example.phones_per_word), _targets(example)
        for level in LEVELS:
            pairs[level][0].extend((scores[level] * SCALES[level]).tolist())
            pairs[level][1].extend((targets[level] * SCALES[level]).tolist())
    return pairs


def train_scoring_head(
    aligner: nn.Module,
    train: Sequence[Example],
    test: Sequence[Example],
    options: ScoringOptions,
    encoder: Encoder | None = None,
) -> dict[str, Any]:
    """Train the head (and, with ``ctc_weight`` > 0, the aligner) on ``train`` minus its validation part; every
    epoch scored on the validation part by phone-level Spearman; the best epoch's weights scored on ``test``.
    ``encoder``: the head reads that model's representations (frozen) instead of the aligner's, which still
    aligns. Returns {"best_epoch", "epochs": [per-epoch validation rho and loss], "test": {level: correlations}}."""
    if encoder is not None and options.ctc_weight > 0:
        raise ValueError(
            "pron.scoring ctc_weight trains the aligner, whose representations an encoder replaces: use 0"
        )
    torch.manual_seed(options.seed)
    fitting = [e for e in train if not validation_part(e.id, options.val_share)]
    validation = [e for e in train if validation_part(e.id, options.val_share)]
    if not fitting or len(validation) < 3:
        raise ValueError(
            f"{len(train)} training utterances leave {len(fitting)} to fit and {len(validation)} to validate; "
            "the scoring head needs more (pron.demo train_size) or another pron.scoring val_share"
        )
    trains_aligner = options.ctc_weight > 0
    aligner = copy.deepcopy(aligner)
    for parameter in aligner.parameters():
        parameter.requires_grad_(trains_aligner)
    width = aligner.config.d_model if encoder is None else int(encoder(train[0]).shape[-1])
    head = ScoringHead(width, options)
    parameters = list(head.parameters()) + (list(aligner.parameters()) if trains_aligner else [])
    optimizer = torch.optim.AdamW(
        parameters, lr=options.peak_learning_rate, weight_decay=options.weight_decay
    )
    steps_per_epoch = math.ceil(len(fitting) / options.batch_size)
    total_steps, step = steps_per_epoch * options.epochs, 0
    frozen = [*fitting, *validation]
    cached = None if trains_aligner else {e.id: _frozen_vectors(aligner, e, encoder) for e in frozen}
    generator = torch.Generator().manual_seed(options.seed)
    history, best = [], (-math.inf, -1, None)
    for epoch in range(options.epochs):
        head.train()
        aligner.train(trains_aligner)
        order = torch.randperm(len(fitting), generator=generator).tolist()
        epoch_loss, counted = 0.0, 0
        for start in range(0, len(order), options.batch_size):
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, total_steps, options)
            losses = []
            for index in order[start : start + options.batch_size]:
                example = fitting[index]
                vectors = cached[example.id] if cached is not None else phone_vectors(aligner, example)
                if vectors is None:
                    continue
                scores, targets = head(vectors[0], example.phones_per_word), _targets(example)
                loss = sum(F.mse_loss(scores[level], targets[level]) for level in LEVELS)
                if trains_aligner:
                    log_probs = vectors[1]  # (T, V)
                    ctc = F.ctc_loss(
                        log_probs[:, None], torch.tensor([example.phones]), torch.tensor([log_probs.shape[0]]),
                        torch.tensor([len(example.phones)]), zero_infinity=True,
                    )  # fmt: skip
                    loss = loss + options.ctc_weight * ctc
                losses.append(loss)
            if losses:
                batch_loss = torch.stack(losses).mean()
                optimizer.zero_grad()
                batch_loss.backward()
                optimizer.step()
                epoch_loss += float(batch_loss.detach()) * len(losses)
                counted += len(losses)
            step += 1
        rho = correlations(*predict(aligner, head, validation, cached)["phone"], resamples=1)["spearman"]
        rho = -math.inf if rho is None else rho
        history.append(
            {"epoch": epoch, "loss": round(epoch_loss / max(counted, 1), 5), "val_phone_spearman": rho}
        )
        if best[2] is None or rho > best[0]:
            best = (rho, epoch, (copy.deepcopy(head.state_dict()), copy.deepcopy(aligner.state_dict())))
    _, best_epoch, (head_state, aligner_state) = best
    head.load_state_dict(head_state)
    aligner.load_state_dict(aligner_state)
    tested = {e.id: _frozen_vectors(aligner, e, encoder) for e in test} if encoder is not None else None
    pairs = predict(aligner, head, test, tested)
    return {
        "predictions": pairs,  # {level: (predicted, human)} on test: for paired comparisons
        "best_epoch": best_epoch,
        "epochs": history,
        "peak_learning_rate": options.peak_learning_rate,
        "fit_utterances": len(fitting),
        "validation_utterances": len(validation),
        "test": {level: correlations(*pairs[level], seed=options.seed) for level in LEVELS},
    }


@torch.no_grad()
def _frozen_vectors(
    aligner: nn.Module, example: Example, encoder: Encoder | None = None
) -> tuple[Tensor, Tensor] | None:
    aligner.eval()
    return phone_vectors(aligner, example, encoder)


__all__ = [
    "LEVELS",
    "Encoder",
    "Example",
    "ScoringHead",
    "ScoringOptions",
    "examples_from",
    "learning_rate",
    "predict",
    "train_scoring_head",
]
