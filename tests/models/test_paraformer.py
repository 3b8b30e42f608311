import dataclasses
import json

import pytest
import torch

from asr_kernels import count_calls
from asr_pipeline.models.paraformer import (
    ALIGNMENT_MODES,
    SIZES,
    Paraformer,
    ParaformerConfig,
    build_paraformer,
    paraformer_config,
    paraformer_tiny,
)
from asr_pipeline.models.registry import build_from_config, build_model, get_spec, peak_learning_rate

VOCAB = 11
INPUT_DIM = 20
ENHANCED_COMPONENTS = {"shallow_ctc", "boundary", "refine"}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


def tiny(**overrides) -> Paraformer:
    torch.manual_seed(0)
    return paraformer_tiny(input_dim=INPUT_DIM, vocab_size=VOCAB, **overrides)


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three utterances of 97, 61 and 23 frames (25, 16 and 6 encoder frames) with 7, 5 and 2 tokens."""
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(3, 97, INPUT_DIM, generator=generator)
    lengths = torch.tensor([97, 61, 23])
    targets = torch.tensor([[3, 5, 2, 7, 4, 9, 9], [6, 1, 8, 8, 2, 0, 0], [10, 4, 0, 0, 0, 0, 0]])
    return features, lengths, targets, torch.tensor([7, 5, 2])


def expected_components(config: ParaformerConfig) -> set[str]:
    names = {"ce", "ctc"} | ({"quantity"} if config.alignment_mode == "cif" else set())
    return names | (ENHANCED_COMPONENTS if config.enhanced else set())


@pytest.mark.parametrize("enhanced", [False, True])
@pytest.mark.parametrize("mode", ALIGNMENT_MODES)
def test_training_returns_per_utterance_losses_and_teacher_forced_token_log_probs(mode, enhanced):
    model = tiny(alignment_mode=mode, enhanced=enhanced).train()
    features, lengths, targets, target_lengths = batch()

    outputs = model(features, lengths, targets, target_lengths)

    assert set(outputs) == {"loss", "token_log_probs", "token_lengths"} | expected_components(model.config)
    for name in outputs.keys() - {"token_log_probs", "token_lengths"}:
        assert outputs[name].shape == (3,), name
        assert torch.isfinite(outputs[name]).all(), name
    assert outputs["token_log_probs"].shape == (3, 7, VOCAB)  # one row per reference token
    assert outputs["token_lengths"].tolist() == [7, 5, 2]


@pytest.mark.parametrize("enhanced", [False, True])
@pytest.mark.parametrize("mode", ALIGNMENT_MODES)
def test_decoding_returns_token_log_probs_without_the_blank_and_their_counts(mode, enhanced):
    model = tiny(alignment_mode=mode, enhanced=enhanced).eval()
    features, lengths, _, _ = batch()

    log_probs, token_lengths = model(features, lengths)

    # Encoder frames: 97 -> 49 -> 25, 61 -> 31 -> 16, 23 -> 12 -> 6 (ceil(L / 4)).
    assert model.output_lengths(lengths).tolist() == [25, 16, 6]
    assert token_lengths.dtype == torch.int64 and token_lengths.shape == (3,)
    assert log_probs.dtype == torch.float32
    assert log_probs.shape == (3, max(1, int(token_lengths.max())), VOCAB)
    assert torch.isneginf(log_probs[..., 0]).all(), "the decoder never predicts the CTC blank"
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(log_probs.shape[:2]))


def test_the_total_loss_is_the_ce_plus_each_component_times_its_weight():
    model = tiny(enhanced=True, ctc_weight=0.2, quantity_weight=0.7, boundary_weight=0.1, refine_weight=0.5)
    outputs = model.eval()(*batch())

    expected = (
        outputs["ce"]
        + 0.7 * outputs["quantity"]
        + 0.2 * outputs["ctc"]
        + 0.3 * outputs["shallow_ctc"]
        + 0.1 * outputs["boundary"]
        + 0.5 * outputs["refine"]
    )
    torch.testing.assert_close(outputs["loss"], expected)


def test_a_zero_weight_removes_its_head_and_its_loss():
    model = tiny(ctc_weight=0.0, enhanced=True, boundary_weight=0.0, refine_weight=0.0)
    outputs = model.eval()(*batch())

    assert model.ctc_head is None and model.boundary_head is None and not model.refines
    assert set(outputs) - {"loss", "token_log_probs", "token_lengths"} == {"ce", "quantity", "shallow_ctc"}


def test_a_config_that_cannot_work_says_what_to_change():
    with pytest.raises(
        ValueError, match=r"alignment_mode='viterbi' builds its decoder queries from the CTC head"
    ):
        ParaformerConfig(alignment_mode="viterbi", ctc_weight=0.0)
    with pytest.raises(ValueError, match="alignment_mode must be one of cif, viterbi, greedy, uniform"):
        ParaformerConfig(alignment_mode="ctc")
    with pytest.raises(ValueError, match=r"shallow_ctc_layer=3 must lie in \[1, 2\]"):
        paraformer_config("tiny", enhanced=True, shallow_ctc_layer=3)


@pytest.mark.parametrize(
    ("mode", "enhanced"), [("cif", True), ("viterbi", False), ("greedy", True), ("uniform", False)]
)
def test_padded_batch_gives_each_utterance_its_own_outputs_in_eval_mode(mode, enhanced):
    model = tiny(alignment_mode=mode, enhanced=enhanced).eval()
    features, lengths, targets, target_lengths = batch()

    log_probs, token_lengths = model(features, lengths)
    losses = model(features, lengths, targets, target_lengths)
    for index in range(3):
        frames, tokens = int(lengths[index]), int(target_lengths[index])
        alone = slice(index, index + 1)
        single_log_probs, single_lengths = model(features[alone, :frames], lengths[alone])
        assert token_lengths[index] == single_lengths[0]
        count = int(single_lengths[0])
        torch.testing.assert_close(
            log_probs[index, :count], single_log_probs[0, :count], rtol=1e-4, atol=1e-4
        )
        single = model(
            features[alone, :frames], lengths[alone], targets[alone, :tokens], target_lengths[alone]
        )
        for name in expected_components(model.config) | {"loss"}:
            torch.testing.assert_close(losses[name][index], single[name][0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("mode", "enhanced"), [("cif", False), ("cif", True), *((m, False) for m in ALIGNMENT_MODES[1:])]
)
def test_a_tiny_batch_is_learnt_until_decoding_recovers_its_tokens(mode, enhanced):
    model = tiny(alignment_mode=mode, enhanced=enhanced, dropout=0.0).train()
    generator = torch.Generator().manual_seed(1)
    features, lengths = torch.randn(2, 80, INPUT_DIM, generator=generator), torch.tensor([80, 64])
    targets, target_lengths = torch.tensor([[3, 5, 2, 7, 4, 9], [6, 1, 8, 8, 2, 0]]), torch.tensor([6, 5])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    losses = []
    for _ in range(80):
        loss = model(features, lengths, targets, target_lengths)["loss"].sum() / target_lengths.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    assert losses[-1] < 0.3 * losses[0]
    log_probs, token_lengths = model.eval()(features, lengths)
    hypotheses = [log_probs[b, : token_lengths[b]].argmax(-1).tolist() for b in range(2)]
    assert hypotheses == [[3, 5, 2, 7, 4, 9], [6, 1, 8, 8, 2]]


def test_the_trained_decoder_pass_sees_target_embeddings_where_the_sampler_glanced():
    model = tiny(glancing_ratio=1.0, dropout=0.0).train()
    features, lengths, targets, target_lengths = batch()
    calls = []
    model.decoder.register_forward_hook(lambda module, args, output: calls.append((args[0].detach(), output)))

    model(features, lengths, targets, target_lengths)

    (queries, first_pass), (inputs, _) = calls  # first pass without gradient, then the trained one
    real = torch.arange(7)[None, :] < target_lengths[:, None]
    wrong = ((first_pass.argmax(-1) != targets) & real).sum(1)
    glanced = (inputs != queries).any(-1)  # (B, U)
    assert glanced.sum(1).tolist() == wrong.tolist()  # ratio 1: one glance per error
    embeddings = model.token_embedding(targets)
    torch.testing.assert_close(inputs[glanced], embeddings[glanced].detach())
    assert not glanced[~real].any()


@pytest.mark.parametrize("mode", ["cif", "viterbi"])
@pytest.mark.parametrize("train", [True, False])
def test_every_parameter_gets_a_gradient_from_a_training_forward(mode, train):
    # DDP (find_unused_parameters=False) needs it on every rank every step, including the eval-mode forward of
    # a rank whose whole batch was skipped (training.loop), and a step where glancing chose nothing.
    model = tiny(alignment_mode=mode, enhanced=True).train(train)

    model(*batch())["loss"].sum().backward()

    missing = [name for name, parameter in model.named_parameters() if parameter.grad is None]
    assert not missing


def test_nothing_fired_decodes_to_one_empty_column():
    model = tiny().eval()
    torch.nn.init.constant_(model.predictor.output.bias, -30.0)  # every CIF weight ~0: no token fires

    log_probs, token_lengths = model(*batch()[:2])

    assert token_lengths.tolist() == [0, 0, 0]
    assert log_probs.shape == (3, 1, VOCAB)


def test_registered_with_its_recipe_rate_frontend_and_decoder_output():
    spec = get_spec("paraformer")
    model = build_model("paraformer", "tiny", input_dim=80, vocab_size=VOCAB, alignment_mode="uniform")

    assert (spec.output, spec.frontend, spec.input_dim, spec.variants) == (
        "paraformer",
        "fbank",
        80,
        tuple(SIZES),
    )
    assert peak_learning_rate("paraformer", None) == peak_learning_rate("paraformer", "demo") == 1e-3
    assert model.config.alignment_mode == "uniform" and model.config.d_model == SIZES["tiny"].d_model
    saved = json.loads(json.dumps(dataclasses.asdict(model.config)))
    assert build_from_config("paraformer", saved).config == model.config


def test_the_encoder_and_decoder_route_their_hot_spots_through_asr_kernels():
    model = tiny(enhanced=True).train()
    with count_calls() as calls:
        model(*batch())["loss"].sum().backward()

    assert {"relative_shift", "padding_mask", "mask_channel_time", "residual_add_mask_time", "glu"} <= set(
        calls
    )


def test_the_named_sizes_have_the_documented_parameter_counts():
    def millions(size: str, vocab_size: int = 257) -> float:
        with torch.device("meta"):  # no memory, no init time
            model = build_paraformer(paraformer_config(size, vocab_size=vocab_size))
        return round(sum(p.numel() for p in model.parameters()) / 1e6, 1)

    assert {size: millions(size) for size in SIZES} == {"base": 43.3, "tiny": 0.1, "demo": 3.3}
    assert millions("base", vocab_size=4234) == 46.3  # with AISHELL-1's characters, as FunASR's recipe
