"""params.yaml features -> ExtractionOptions: the architecture named there (or the training one) picks the
frontend through the registry; unknown names are refused naming the params key to fix."""

from __future__ import annotations

import pytest

from asr_pipeline.models.feature_options import extraction_options
from asr_pipeline.options import ConfigError


@pytest.mark.parametrize(
    ("architecture", "frontend"),
    [
        ("squeezeformer", "fbank"),
        ("zipformer", "fbank"),
        ("w2v-bert", "w2v-bert"),
        ("speech-aligner", "mfcc"),
    ],
)
def test_the_features_architecture_picks_its_registered_frontend(architecture, frontend):
    assert extraction_options({"architecture": architecture}).frontend_name == frontend


def test_a_null_features_architecture_follows_the_training_one_else_the_default():
    assert (
        extraction_options({"architecture": None}, train_architecture="w2v-bert").frontend_name == "w2v-bert"
    )
    assert (
        extraction_options({"architecture": "zipformer"}, train_architecture="w2v-bert").frontend_name
        == "fbank"
    )
    assert extraction_options({}).frontend_name == "fbank"  # squeezeformer, the registry's default


def test_a_frontend_given_outright_wins_over_the_architecture():
    assert extraction_options({"architecture": "w2v-bert", "frontend_name": "mfcc"}).frontend_name == "mfcc"


def test_an_unknown_features_architecture_names_the_features_key():
    with pytest.raises(
        ConfigError, match=r"params.yaml features: architecture must be one of squeezeformer, .*"
    ):
        extraction_options({"architecture": "conformer"})


def test_an_unknown_training_architecture_names_train_model_architecture():
    with pytest.raises(
        ConfigError, match=r"params.yaml train.model.architecture: must be one of .*'conformer'"
    ):
        extraction_options({"architecture": None}, train_architecture="conformer")
