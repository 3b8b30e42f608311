"""Agreement with human scores (pron.evaluation): scipy's statistics with seeded bootstrap intervals, and paired
differences between two predictors on the same items."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from asr_pipeline.pron.evaluation import correlations, paired_difference


def test_the_statistics_are_scipys_and_the_intervals_hold_them():
    rng = np.random.default_rng(1)
    human = rng.integers(0, 3, size=200).astype(float)
    predicted = human + rng.normal(0, 1.0, size=200)

    result = correlations(predicted, human, resamples=300, seed=4)

    assert result["items"] == 200
    assert result["spearman"] == pytest.approx(stats.spearmanr(predicted, human).statistic, abs=1e-4)
    assert result["pearson"] == pytest.approx(stats.pearsonr(predicted, human).statistic, abs=1e-4)
    for name in ("spearman", "pearson"):
        low, high = result[f"{name}_ci"]
        assert low < result[name] < high and high - low < 0.3
    assert correlations(predicted, human, resamples=300, seed=4) == result, "seeded: the same intervals"
    assert correlations(human, human, resamples=50)["spearman_ci"] == [1.0, 1.0]


def test_a_paired_difference_separates_a_good_predictor_from_noise_and_not_from_itself():
    rng = np.random.default_rng(2)
    human = rng.normal(size=150)
    good, noise = human + rng.normal(0, 0.5, size=150), rng.normal(size=150)

    better = paired_difference(good, noise, human, resamples=300)
    same = paired_difference(good, good, human, resamples=300)

    assert better["difference"] > 0.5 and better["difference_ci"][0] > 0
    assert same == {"difference": 0.0, "difference_ci": [0.0, 0.0]}
    assert correlations(good, np.ones(150))["spearman"] is None
    assert correlations(good, np.ones(150))["note"] == "constant human scores"
    with pytest.raises(ValueError, match="equally long"):
        correlations([1.0, 2.0, 3.0], [1.0, 2.0])
