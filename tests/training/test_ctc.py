"""training.ctc: every output kind a spec can name has one objective, which the loop and validation ask for
losses, the empty-batch loss, what to decode and which scores to keep, instead of testing the kind."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.models.registry import SPECS, build_model
from asr_pipeline.training.ctc import OBJECTIVES, empty_batch_loss, objective_of
from asr_pipeline.training.validation import validation_metrics


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_registered_architecture_has_the_objective_of_its_output_kind(name):
    objective = objective_of(name)

    assert objective is OBJECTIVES[SPECS[name].output]
    assert validation_metrics(name) == objective.metrics


def test_text_objectives_score_cer_and_units_score_loss_and_accuracy():
    assert OBJECTIVES["ctc"].metrics == OBJECTIVES["paraformer"].metrics == ("val_cer", "val_wer")
    assert (
        OBJECTIVES["hubert"].metrics == ("val_loss", "val_accuracy") and not OBJECTIVES["hubert"].text_output
    )
    assert [name for name, objective in OBJECTIVES.items() if objective.frame_posteriors] == ["ctc"]
    assert [name for name, objective in OBJECTIVES.items() if objective.frame_labels_are_targets] == [
        "hubert"
    ]


@pytest.mark.parametrize("architecture", ["squeezeformer", "paraformer", "hubert-pretrain"])
def test_the_empty_batch_loss_is_zero_and_reaches_every_trained_parameter_head(architecture):
    input_dim = SPECS[architecture].input_dim
    model = build_model(architecture, "tiny", input_dim=input_dim, vocab_size=9)
    features, lengths = torch.randn(1, 40, input_dim), torch.tensor([40])

    loss = empty_batch_loss(model, features, lengths, architecture)
    loss.backward()

    assert loss.item() == 0.0 and loss.dim() == 0
    assert any(parameter.grad is not None for parameter in model.parameters())
