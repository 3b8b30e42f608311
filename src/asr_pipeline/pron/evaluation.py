"""Agreement of predicted pronunciation scores with human scores: Spearman's rho and Pearson's r, each with a 95%
bootstrap confidence interval, and paired bootstrap comparisons of two predictors on the same items.

The bootstrap resamples items (predicted and human score together) with replacement ``resamples`` times with a
seeded generator and takes the 2.5th and 97.5th percentiles of the statistic. The paired comparison resamples the
same item indices for both predictors, so the interval of the difference accounts for their shared items: two
inputs (MFCC vs log-mel, CTC weight 0 vs 0.5) differ when the interval of rho_a - rho_b excludes 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

RESAMPLES = 1000


def _rho(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.spearmanr(a, b).statistic)


def _r(a: np.ndarray, b: np.ndarray) -> float:
    return float(stats.pearsonr(a, b).statistic)


def _checked(*columns: Sequence[float]) -> list[np.ndarray]:
    arrays = [np.asarray(column, dtype=np.float64) for column in columns]
    if len({len(a) for a in arrays}) != 1 or len(arrays[0]) < 3:
        raise ValueError(
            f"need equally long score lists of at least 3 items, got lengths {[len(a) for a in arrays]}"
        )
    return arrays


def _rowwise_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair of (R, N) arrays; NaN for a constant row."""
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x * y).sum(axis=1) / np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))


def _bootstrap(pred: np.ndarray, gold: np.ndarray, draws: np.ndarray, rank: bool) -> np.ndarray:
    """The statistic over each resample (rows of ``draws``): Spearman when ``rank`` (Pearson of average ranks,
    as scipy computes it), else Pearson; resamples without a defined value dropped."""
    a, b = pred[draws], gold[draws]  # (R, N)
    if rank:
        a, b = stats.rankdata(a, axis=1), stats.rankdata(b, axis=1)
    values = _rowwise_pearson(a, b)
    return values[np.isfinite(values)]


def _interval(samples: np.ndarray) -> list[float] | None:
    """The 2.5th and 97.5th percentiles; None when no resample had a defined value (a handful of items)."""
    if samples.size == 0:
        return None
    return [round(float(v), 4) for v in np.percentile(samples, [2.5, 97.5])]


def correlations(
    predicted: Sequence[float], human: Sequence[float], resamples: int = RESAMPLES, seed: int = 0
) -> dict[str, Any]:
    """{"items", "spearman", "spearman_ci", "pearson", "pearson_ci"}: the statistics and their 95% intervals."""
    pred, gold = _checked(predicted, human)
    result: dict[str, Any] = {"items": len(pred)}
    if np.ptp(pred) == 0 or np.ptp(gold) == 0:  # no correlation is defined: say so rather than report NaN
        constant = "human" if np.ptp(gold) == 0 else "predicted"
        nothing = dict.fromkeys(("spearman", "spearman_ci", "pearson", "pearson_ci"))
        return {**result, **nothing, "note": f"constant {constant} scores"}
    draws = np.random.default_rng(seed).integers(0, len(pred), size=(resamples, len(pred)))
    for name, statistic, rank in (("spearman", _rho, True), ("pearson", _r, False)):
        samples = _bootstrap(pred, gold, draws, rank)
        result[name] = round(statistic(pred, gold), 4)
        result[f"{name}_ci"] = _interval(samples)
    return result


def paired_difference(
    predicted_a: Sequence[float],
    predicted_b: Sequence[float],
    human: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Spearman rho of a minus that of b on the same items, with its paired 95% bootstrap interval."""
    a, b, gold = _checked(predicted_a, predicted_b, human)
    if min(np.ptp(a), np.ptp(b), np.ptp(gold)) == 0:
        return {"difference": None, "difference_ci": None, "note": "constant scores: no rank correlation"}
    draws = np.random.default_rng(seed).integers(0, len(gold), size=(resamples, len(gold)))
    golds = stats.rankdata(gold[draws], axis=1)
    samples = _rowwise_pearson(stats.rankdata(a[draws], axis=1), golds) - _rowwise_pearson(
        stats.rankdata(b[draws], axis=1), golds
    )
    samples = samples[np.isfinite(samples)]
    return {
        "difference": round(_rho(a, gold) - _rho(b, gold), 4),
        "difference_ci": _interval(samples),
    }


__all__ = ["correlations", "paired_difference"]
