"""Choosing the LM weight, word score and blank penalty on dev: a grid search over cached log-probs.

The acoustic model runs once; every grid point only re-runs the beam search over the same (B, T, V)
log-probs, so a 6 x 6 grid on the demo's dev split costs ~36 decodes of a fraction of a second each. The
point with the lowest WER wins (ties: lower CER, then the earlier point in grid order, so the result does not
depend on float noise between runs). The chosen values go to the `evaluate` stage, which applies them to
test: tuning on the split that is scored would flatter the result.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asr_pipeline.decoding.decoders import Decoder
from asr_pipeline.decoding.inference import BatchOutput
from asr_pipeline.decoding.metrics import error_rates
from asr_pipeline.decoding.options import DecodingOptions

logger = logging.getLogger(__name__)

TUNABLE = ("lm_weight", "word_score", "blank_penalty", "beam_width", "beam_size_token")


@dataclass(frozen=True)
class GridPoint:
    values: dict[str, float]
    wer: float
    cer: float


@dataclass(frozen=True)
class TuningResult:
    options: DecodingOptions  # the base options with the best point's values
    best: GridPoint
    table: list[GridPoint]  # every point, in grid order

    def report(self) -> dict[str, Any]:
        """JSON-able: the chosen values, their dev WER/CER and the whole grid (percent, 3 decimals)."""
        return {
            "chosen": self.best.values,
            "dev": {"wer": round(self.best.wer, 3), "cer": round(self.best.cer, 3)},
            "grid": [{**p.values, "wer": round(p.wer, 3), "cer": round(p.cer, 3)} for p in self.table],
        }


def decode_texts(decoder: Decoder, batches: Sequence[BatchOutput]) -> list[str]:
    """The best hypothesis' text for every utterance of ``batches``, in order ("" when none survives)."""
    texts = []
    for batch in batches:
        for n_best in decoder.decode_batch(batch.log_probs, batch.lengths):
            texts.append(n_best[0].text if n_best else "")
    return texts


def grid_points(grid: Mapping[str, Sequence[float]]) -> list[dict[str, float]]:
    """Every combination of the grid's values, in row-major order of its keys as given."""
    unknown = sorted(set(grid) - set(TUNABLE))
    if unknown:
        raise ValueError(f"cannot tune {unknown}: the tunable options are {list(TUNABLE)}")
    empty = [name for name, values in grid.items() if not values]
    if empty:
        raise ValueError(f"the grid gives no values for {empty}")
    names = list(grid)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(grid[n] for n in names))]


def tune_decoder(
    base: DecodingOptions,
    grid: Mapping[str, Sequence[float]],
    make_decoder: Callable[[DecodingOptions], Decoder],
    batches: Sequence[BatchOutput],
    progress: Callable[[GridPoint], None] | None = None,
) -> TuningResult:
    """The best grid point (lowest WER; ``base`` with its values as ``options``) and every point's WER/CER
    (percent)."""
    references = [text for batch in batches for text in batch.texts]
    table: list[GridPoint] = []
    for values in grid_points(grid):
        options = dataclasses.replace(base, **_typed(values))
        rates = error_rates(references, decode_texts(make_decoder(options), batches))
        point = GridPoint(values, rates.wer, rates.cer)
        table.append(point)
        if progress is not None:
            progress(point)
    best = min(table, key=lambda point: (round(point.wer, 6), round(point.cer, 6)))  # min keeps the first tie
    return TuningResult(dataclasses.replace(base, **_typed(best.values)), best, table)


def tune_decoders(
    bases: Mapping[str, DecodingOptions],
    grids: Mapping[str, Mapping[str, Sequence[float]]],
    make_decoder: Callable[[DecodingOptions], Decoder],
    batches: Sequence[BatchOutput],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Tune each named decoder from its base options over its grid (``tune_decoder``; a decoder without a
    grid keeps its base options, scored all the same): the chosen options per decoder (JSON-able, what the
    evaluate stage decodes with) and each one's report. Every point is logged as it is scored."""
    tuned, reports = {}, {}
    for name, base in bases.items():

        def log_point(point: GridPoint, name: str = name) -> None:
            logger.info("tune %s %s: WER %.2f CER %.2f", name, point.values, point.wer, point.cer)

        result = tune_decoder(base, grids.get(name) or {}, make_decoder, batches, log_point)
        tuned[name], reports[name] = dataclasses.asdict(result.options), result.report()
    return tuned, reports


def _typed(values: Mapping[str, Any]) -> dict[str, Any]:
    return {name: int(value) if name.startswith("beam_") else float(value) for name, value in values.items()}
