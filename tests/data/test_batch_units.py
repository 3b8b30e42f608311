import numpy as np
import pytest

from asr_pipeline.data.batch_units import BATCH_UNITS
from asr_pipeline.data.batching import example_costs
from asr_pipeline.options import from_dict
from asr_pipeline.training.config import DataConfig


@pytest.mark.parametrize("unit", BATCH_UNITS)
def test_every_unit_named_is_one_the_sampler_can_cost(unit):
    costs = example_costs(unit, np.array([3, 5]), durations_ms=np.array([30, 50]), feature_dim=4)

    assert costs.shape == (2,) and (costs > 0).all()


@pytest.mark.parametrize("unit", BATCH_UNITS)
def test_the_training_config_takes_every_unit(unit):
    assert (
        from_dict(
            DataConfig, {"train_manifests": ["a.parquet"], "adaptive_batch_unit": unit}
        ).adaptive_batch_unit
        == unit
    )


def test_the_training_config_refuses_a_unit_the_sampler_does_not_know():
    with pytest.raises(ValueError, match="padded-frames"):
        from_dict(DataConfig, {"train_manifests": ["a.parquet"], "adaptive_batch_unit": "tokens"})
