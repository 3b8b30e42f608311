"""Encoder representations (models.representations): the hidden states a CTC model's head reads, for every
architecture with a CTC head, so that the head applied to them gives the model's own log-probs."""

from __future__ import annotations

import pytest
import torch

from asr_pipeline.models.registry import get_spec
from asr_pipeline.models.representations import encoder_states


@pytest.mark.parametrize(
    "architecture", ["squeezeformer", "zipformer", "w2v-bert", "hubert", "speech-aligner"]
)
def test_the_states_are_what_the_ctc_head_reads(architecture):
    spec = get_spec(architecture)
    torch.manual_seed(0)
    model = spec.builder(
        spec.config_for("tiny", {"input_dim": spec.input_dim, "vocab_size": 11, "dropout": 0.0})
    )
    model.eval()
    features, lengths = torch.randn(2, 96, spec.input_dim), torch.tensor([96, 70])

    states, state_lengths = encoder_states(model, architecture, features, lengths)
    log_probs, out_lengths = model(features, lengths)

    assert states.shape[:2] == log_probs.shape[:2] and torch.equal(state_lengths, out_lengths)
    head = model.get_submodule(spec.ctc_head)
    torch.testing.assert_close(head(states).float().log_softmax(-1), log_probs.float(), rtol=1e-4, atol=1e-5)


def test_an_architecture_without_a_ctc_head_is_refused():
    spec = get_spec("hubert-pretrain")
    with pytest.raises(ValueError, match="hubert-pretrain has no CTC head"):
        encoder_states(torch.nn.Identity(), spec.name, torch.zeros(1, 4, 320), torch.tensor([4]))
