import importlib
import importlib.util
import sys
import types

import pytest
import torch

from asr_pipeline.models.cif import CIFPredictor, cif, fire_counts, quantity_loss, token_positions


def ramp(*shape: int) -> torch.Tensor:
    """(1, T, D) hidden whose frame t is the constant t + 1, so embeddings read as weighted frame sums."""
    batch, frames, dim = shape
    return torch.arange(1.0, frames + 1)[None, :, None].expand(batch, frames, dim).contiguous()


def random_batch(lengths: list[int], dim: int, seed: int = 0, high: float = 0.95):
    """hidden (B, T, D) zero at padding, alphas (B, T) in [0, high) zero at padding, lengths (B,)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    mask = torch.arange(int(lengths.max())) < lengths[:, None]  # (B, T)
    hidden = torch.randn(len(lengths), int(lengths.max()), dim, generator=generator) * mask[..., None]
    alphas = torch.rand(len(lengths), int(lengths.max()), generator=generator) * high * mask
    return hidden, alphas, lengths


class FixedWeights(CIFPredictor):
    """A predictor whose frame weights are given, to work the tail and count rules by hand."""

    def __init__(self, alphas: torch.Tensor, **kwargs):
        super().__init__(dim=1, **kwargs)
        self.fixed = alphas

    def frame_weights(self, hidden, lengths):
        return self.fixed * (torch.arange(hidden.size(1)) < lengths[:, None])


# --- integrate-and-fire on hand-worked weights ---------------------------------------------------------------


def test_fires_where_the_integral_reaches_the_threshold_and_splits_the_firing_frame():
    # cumsum 0.3 0.6 1.2 | 1.7 2.6 2.8: tokens fire at frames 2 and 4.
    #   token 0 = 0.3*1 + 0.3*2 + 0.4*3           = 2.1  (frame 2 gives 0.4 to complete it ...)
    #   token 1 = 0.2*3 + 0.5*4 + 0.3*5           = 4.1  (... and its other 0.2 starts token 1)
    #   left over 0.6*5 + 0.2*6 (0.8 of a token)  -> dropped
    alphas = torch.tensor([[0.3, 0.3, 0.6, 0.5, 0.9, 0.2]])

    embeddings, counts = cif(ramp(1, 6, 2), alphas)

    assert counts.tolist() == [2]
    assert counts.dtype == torch.int64
    torch.testing.assert_close(embeddings, torch.tensor([[[2.1, 2.1], [4.1, 4.1]]]))
    assert fire_counts(alphas).tolist() == [[0, 0, 1, 0, 1, 0]]


def test_a_frame_that_lands_exactly_on_the_threshold_fires_and_gives_nothing_to_the_next_token():
    alphas = torch.tensor([[0.5, 0.5, 0.25, 0.75]])

    embeddings, counts = cif(ramp(1, 4, 1), alphas)

    assert counts.tolist() == [2]
    assert fire_counts(alphas).tolist() == [[0, 1, 0, 1]]
    torch.testing.assert_close(embeddings[0, :, 0], torch.tensor([0.5 * 1 + 0.5 * 2, 0.25 * 3 + 0.75 * 4]))


def test_a_weight_above_the_threshold_fires_one_token_per_threshold_it_spans():
    # cumsum 0.5 | 2.5 | 3.0: frame 1 completes token 0 (0.5), fills token 1 (1.0) and starts token 2 (0.5).
    alphas = torch.tensor([[0.5, 2.0, 0.5]])

    embeddings, counts = cif(ramp(1, 3, 1), alphas)

    assert counts.tolist() == [3]
    assert fire_counts(alphas).tolist() == [[0, 2, 1]]
    torch.testing.assert_close(embeddings[0, :, 0], torch.tensor([0.5 + 1.0, 2.0, 1.0 + 1.5]))


def test_a_threshold_other_than_one_fires_every_threshold_of_weight():
    alphas = torch.tensor(
        [[0.5, 1.0, 0.5, 1.5]]
    )  # threshold 1.5: cumsum 0.5 1.5 | 2.0 3.5 -> fires at 1 and 3

    embeddings, counts = cif(ramp(1, 4, 1), alphas, threshold=1.5)

    assert counts.tolist() == [2]
    torch.testing.assert_close(embeddings[0, :, 0], torch.tensor([0.5 + 2.0, 1.5 + 1.0 * 4]))


@pytest.mark.parametrize(("numerator", "denominator"), [(1, 10), (7, 10), (3, 10), (1, 3)])
def test_weights_that_sum_to_whole_tokens_give_exact_counts_and_fire_positions_on_10k_frames(
    numerator, denominator
):
    # float32 0.7 is 0.7 - 1.2e-8: an unsnapped float64 cumsum reaches 6999.99988 after 10k frames and misses
    # 1999 fire positions; FunASR's float32-loop `cif` counts 6999 tokens. The exact positions come from
    # integer arithmetic.
    frames = 10_000
    alphas = torch.full((1, frames), numerator / denominator)
    ends = torch.arange(1, frames + 1) * numerator // denominator
    exact_fires = torch.diff(ends, prepend=torch.zeros(1, dtype=torch.long))[None]

    embeddings, counts = cif(torch.ones(1, frames, 1), alphas)

    assert counts.item() == frames * numerator // denominator
    assert torch.equal(fire_counts(alphas), exact_fires)
    torch.testing.assert_close(
        embeddings, torch.ones_like(embeddings)
    )  # every token is exactly 1.0 of frames


def test_weights_that_sum_to_one_in_decimal_fire_even_when_float32_sums_them_just_below():
    alphas = torch.tensor([[0.9, 0.1] * 500])  # float32 0.9 + 0.1 = 1 - 2.2e-8

    assert torch.cumsum(alphas.double(), 1)[0, 1] < 1.0
    assert cif(torch.ones(1, 1000, 1), alphas)[1].item() == 500


def test_snapping_keeps_positions_monotone_and_gradients_unchanged():
    alphas = torch.tensor([[0.7] * 10 + [0.3, 1e-9, 0.0]], dtype=torch.float32, requires_grad=True)

    positions = token_positions(alphas)
    positions.sum().backward()

    assert positions[0, 9].item() == 7.0
    assert bool((torch.diff(positions.detach()) >= 0).all())
    torch.testing.assert_close(alphas.grad, torch.arange(13.0, 0, -1)[None])  # d sum(cumsum) / d alpha_t


def test_an_utterance_where_nothing_fires_gets_one_zero_column_and_count_zero():
    embeddings, counts = cif(torch.randn(2, 5, 3), torch.tensor([[0.1] * 5, [0.0] * 5]))
    assert embeddings.shape == (2, 1, 3)
    assert counts.tolist() == [0, 0]
    assert not embeddings.any()

    embeddings, counts = cif(torch.randn(2, 0, 3), torch.zeros(2, 0))
    assert embeddings.shape == (2, 1, 3)
    assert counts.tolist() == [0, 0]


def test_rows_are_independent_so_a_padded_batch_equals_each_utterance_alone():
    hidden, alphas, lengths = random_batch([41, 29, 1, 0, 37], dim=7)

    embeddings, counts = cif(hidden, alphas)

    for row, length in enumerate(lengths.tolist()):
        alone, count = cif(hidden[row : row + 1, :length], alphas[row : row + 1, :length])
        assert counts[row] == count[0]
        torch.testing.assert_close(embeddings[row, : int(count[0])], alone[0, : int(count[0])])
        assert not embeddings[row, int(count[0]) :].any()


def test_gradients_match_finite_differences_for_alphas_and_hidden():
    # CIF is piecewise linear in alphas (the pieces change only where a cumulative sum crosses a whole token),
    # so float64 finite differences on random weights are exact up to O(eps).
    # No padding: gradcheck nudges every weight by -1e-6, and a zero weight would turn negative.
    hidden, alphas, _ = random_batch([11, 11], dim=3, seed=1)
    hidden, alphas = hidden.double().requires_grad_(), (alphas.double() + 0.05).requires_grad_()

    assert torch.autograd.gradcheck(lambda h, a: cif(h, a)[0], (hidden, alphas))


def test_bad_weights_are_refused_with_a_message_that_names_them():
    with pytest.raises(ValueError, match="finite and >= 0"):
        cif(torch.zeros(1, 3, 2), torch.tensor([[0.5, -0.1, 0.5]]))
    with pytest.raises(ValueError, match="finite and >= 0"):
        cif(torch.zeros(1, 3, 2), torch.tensor([[0.5, float("nan"), 0.5]]))
    with pytest.raises(ValueError, match=r"hidden \(B, T, D\) and alphas \(B, T\)"):
        cif(torch.zeros(1, 3, 2), torch.zeros(1, 4))


# --- the predictor ----------------------------------------------------------------------------------------------


def test_decoding_appends_the_tail_threshold_so_a_nearly_complete_last_token_fires():
    # 0.5 0.5 | 0.6 -> 1.6 of weight; + 0.45 on a zero frame after the end = 2.05: the 0.6 token fires, with
    # the zero frame adding nothing to its embedding. 0.5 0.5 | 0.5 + 0.45 = 1.95: the last token does not.
    alphas = torch.tensor([[0.5, 0.5, 0.6], [0.5, 0.5, 0.5]])
    predictor = FixedWeights(alphas).eval()

    out = predictor(ramp(2, 3, 1), torch.tensor([3, 3]))

    assert out.token_lengths.tolist() == [2, 1]
    torch.testing.assert_close(out.embeddings[:, :, 0], torch.tensor([[1.5, 0.6 * 3], [1.5, 0.0]]))
    torch.testing.assert_close(out.quantity, torch.tensor([1.6, 1.5]))
    torch.testing.assert_close(out.alphas, alphas)  # the tail is not part of the returned weights


def test_training_scales_the_weights_to_the_target_length_and_fires_exactly_that_many_tokens():
    hidden, _, lengths = random_batch([53, 47, 31, 8, 3], dim=6, seed=2)
    targets = torch.tensor([17, 30, 4, 9, 0])  # 9 tokens from 8 frames: some weights exceed the threshold
    torch.manual_seed(0)
    predictor = CIFPredictor(6).train()

    out = predictor(hidden, lengths, targets)

    assert out.token_lengths.tolist() == targets.tolist()
    assert out.embeddings.shape == (5, 30, 6)
    torch.testing.assert_close(out.alphas.sum(1), targets.float())
    for row, target in enumerate(targets.tolist()):
        assert out.embeddings[row, :target].abs().sum(-1).gt(0).all()
        assert not out.embeddings[row, target:].any()
    assert bool(((out.quantity > 0) & (out.quantity < lengths)).all())  # unscaled: sigmoid weights in (0, 1)


def test_training_fires_every_target_token_even_when_all_weights_are_zero():
    # Nothing to scale: the whole target weight goes on the zero frame after the end, so 3 zero tokens fire.
    predictor = FixedWeights(torch.zeros(2, 4)).train()

    out = predictor(torch.randn(2, 4, 1), torch.tensor([4, 2]), torch.tensor([3, 1]))

    assert out.token_lengths.tolist() == [3, 1]
    assert out.embeddings.shape == (2, 3, 1)
    assert not out.embeddings.any()
    assert out.quantity.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("with_targets", [False, True], ids=["decoding", "training"])
def test_predictor_on_a_padded_batch_equals_each_utterance_alone(with_targets):
    hidden, _, lengths = random_batch([37, 23, 2], dim=5, seed=3)
    hidden = hidden + 10.0 * (torch.arange(37) >= lengths[:, None])[..., None]  # padding holds garbage
    targets = torch.tensor([12, 9, 1]) if with_targets else None
    torch.manual_seed(0)
    predictor = CIFPredictor(5).eval()

    out = predictor(hidden, lengths, targets)

    for row, length in enumerate(lengths.tolist()):
        alone = predictor(
            hidden[row : row + 1, :length],
            lengths[row : row + 1],
            None if targets is None else targets[row : row + 1],
        )
        count = int(alone.token_lengths[0])
        assert out.token_lengths[row] == count
        torch.testing.assert_close(out.alphas[row, :length], alone.alphas[0])
        torch.testing.assert_close(out.quantity[row], alone.quantity[0])
        torch.testing.assert_close(out.embeddings[row, :count], alone.embeddings[0, :count])


def test_gradients_reach_the_predictor_and_the_encoder_frames_through_embeddings_and_quantity():
    hidden, _, lengths = random_batch([19, 13], dim=4, seed=4)
    hidden.requires_grad_()
    torch.manual_seed(0)
    predictor = CIFPredictor(4, dropout=0.0).train()
    targets = torch.tensor([6, 4])

    out = predictor(hidden, lengths, targets)
    (out.embeddings.square().sum() + quantity_loss(out.quantity, targets).sum()).backward()

    assert hidden.grad[0].abs().sum() > 0 and hidden.grad[1, :13].abs().sum() > 0
    assert not hidden.grad[1, 13:].any()  # padding takes no part
    for name, parameter in predictor.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_quantity_loss_is_the_absolute_count_error_per_utterance():
    loss = quantity_loss(torch.tensor([2.5, 4.0, 0.2]), torch.tensor([3, 4, 1]))
    torch.testing.assert_close(loss, torch.tensor([0.5, 0.0, 0.8]))


# --- parity with FunASR -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def funasr_cif():
    """``funasr.models.paraformer.cif_predictor`` (funasr 1.4.16, test-only, installed --no-deps by .ci/setup.sh).

    Not through ``import funasr``: its ``__init__`` imports all ~300 submodules (5-6 s, swallowing ~120
    ImportErrors for the dependencies --no-deps leaves out, printing "Please install torch_complex") and
    resets the root logger to INFO. A bare package object in its place loads just this file and the four
    small modules it imports (funasr.register, train_utils.device_funcs, transformer nets_utils, utils.amp).
    """
    spec = importlib.util.find_spec("funasr")
    if spec is None:
        pytest.skip("funasr is not installed: `bash .ci/setup.sh` installs funasr==1.4.16 --no-deps")
    stubbed = "funasr" not in sys.modules
    if stubbed:
        package = types.ModuleType("funasr")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["funasr"] = package
    try:
        yield importlib.import_module("funasr.models.paraformer.cif_predictor")
    finally:
        if stubbed:
            for name in [name for name in sys.modules if name == "funasr" or name.startswith("funasr.")]:
                del sys.modules[name]


SHAPES = [([97, 80, 51, 33], 13), ([127, 128, 64], 8), ([257], 31), ([5, 17, 3, 11, 2, 7], 3)]


@pytest.mark.parametrize(("lengths", "dim"), SHAPES)
@pytest.mark.parametrize("reference", ["cif", "cif_v1"])
def test_cif_matches_funasr_on_random_weights(funasr_cif, reference, lengths, dim):
    hidden, alphas, _ = random_batch(lengths, dim, seed=len(lengths) * dim)

    theirs, fires = getattr(funasr_cif, reference)(hidden, alphas, 1.0)
    ours, counts = cif(hidden, alphas)

    # FunASR pads to round(sum alpha), so it may carry one more (zero) column than the fired count.
    assert torch.equal(counts, (fires >= 1.0).sum(1))
    columns = ours.size(1)
    torch.testing.assert_close(ours, theirs[:, :columns], atol=2e-5, rtol=1e-5)
    assert not theirs[:, columns:].any()


def funasr_predictor(funasr_cif, ours: CIFPredictor):
    theirs = funasr_cif.CifPredictorV2(ours.conv.in_channels, 1, 1, tail_threshold=ours.tail_threshold)
    theirs.cif_conv1d.load_state_dict(ours.conv.state_dict())
    theirs.cif_output.load_state_dict(ours.output.state_dict())
    return theirs.eval()


def test_decoding_with_the_tail_matches_funasr_cif_predictor_v2(funasr_cif):
    # FunASR puts the tail weight on the first padded frame and reads the encoder output there; ours reads
    # zeros. With padding zeroed (as our padding-invariance asks), the two agree.
    hidden, _, lengths = random_batch([97, 80, 51, 33, 4], dim=13, seed=5)
    torch.manual_seed(0)
    ours = CIFPredictor(13).eval()
    mask = (torch.arange(97) < lengths[:, None])[:, None, :]  # (B, 1, T) FunASR's mask layout

    embeddings, token_num, alphas, _ = funasr_predictor(funasr_cif, ours)(hidden, mask=mask)
    out = ours(hidden, lengths)

    assert out.token_lengths.tolist() == token_num.long().tolist()
    torch.testing.assert_close(out.alphas, alphas[:, :97] * mask[:, 0])  # theirs holds the tail weight too
    torch.testing.assert_close(out.embeddings, embeddings, atol=2e-5, rtol=1e-5)


def test_training_matches_funasr_cif_predictor_v2_and_fires_the_token_float32_loses(funasr_cif):
    hidden, _, lengths = random_batch([97, 80, 51, 33], dim=13, seed=0)
    targets = torch.tensor([30, 20, 10, 5])
    torch.manual_seed(0)
    ours = CIFPredictor(13).eval()
    mask = (torch.arange(97) < lengths[:, None])[:, None, :]

    embeddings, token_num, alphas, fires = funasr_predictor(funasr_cif, ours)(
        hidden, mask=mask, target_label_length=targets.float()
    )
    out = ours(hidden, lengths, targets)

    torch.testing.assert_close(out.quantity, token_num)  # both report the unscaled sum
    torch.testing.assert_close(out.alphas, alphas)
    fired = (fires >= 1.0).sum(1)
    # FunASR's scaled weights sum to U within float32 rounding; where the sum lands just below U, its float32
    # cast of the float64 cumsum stays below U and the last token never fires (a zero vector). Ours snaps the
    # sum onto U and fires it; every token both fire agrees.
    assert out.token_lengths.tolist() == targets.tolist()
    assert (fired < targets).any(), "this seed was chosen to show FunASR's short row"
    for row, count in enumerate(fired.tolist()):
        assert count in (targets[row], targets[row] - 1)
        torch.testing.assert_close(out.embeddings[row, :count], embeddings[row, :count], atol=2e-5, rtol=1e-5)
        if count < targets[row]:
            assert not embeddings[row, count].any() and out.embeddings[row, count].abs().sum() > 0
