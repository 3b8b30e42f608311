import dataclasses
import json

import pytest
import torch

from asr_pipeline.models.squeezeformer import (
    SIZES,
    Squeezeformer,
    SqueezeformerConfig,
    build_squeezeformer,
    paper_time_indices,
    squeezeformer_config,
    squeezeformer_tiny,
)
from tests.models import ctc_steps
from tests.models.ctc_steps import ctc_overfit_losses


def tiny(**overrides) -> Squeezeformer:
    torch.manual_seed(0)
    return squeezeformer_tiny(input_dim=20, vocab_size=11, **overrides)


def count_parameters(config: SqueezeformerConfig) -> int:
    with torch.device("meta"):  # no memory, no init time: Squeezeformer-L has 236 M parameters
        return sum(p.numel() for p in build_squeezeformer(config).parameters())


def test_output_shapes_and_lengths_on_prime_lengths():
    # Frames per stage for the longest example, 97 input frames (10 ms):
    #   subsampling: ceil(97/2) = 49 -> ceil(49/2) = 25   (40 ms)
    #   reduce:      ceil(25/2) = 13                      (80 ms, blocks 1-2 of tiny)
    #   recover:     13 * 2 = 26, trimmed to the skip's 25 (40 ms, block 3)
    # The others: 61 -> 31 -> 16; 23 -> 12 -> 6; 5 -> 3 -> 2.
    model = tiny().eval()
    features = torch.randn(4, 97, 20)
    lengths = torch.tensor([97, 61, 23, 5])

    ctc_steps.assert_ctc_outputs(model, features, lengths, expected=[25, 16, 6, 2], vocab_size=11)


def test_middle_blocks_run_at_half_the_frame_rate():
    model = tiny().eval()
    seen = []
    for block in model.blocks:
        block.register_forward_hook(lambda module, args, out: seen.append(args[0].size(1)))

    model(torch.randn(1, 97, 20), torch.tensor([97]))

    assert seen == [25, 13, 13, 25]  # tiny: reduce before block 1, recover before block 3


def test_without_recovery_the_output_stays_at_one_eighth():
    model = tiny(time_recover_idx=None).eval()
    log_probs, lengths = model(torch.randn(2, 97, 20), torch.tensor([97, 23]))

    assert model.config.downsampling == 8
    assert log_probs.shape == (2, 13, 11)
    assert lengths.tolist() == [13, 3]  # 23 -> 12 -> 6 -> 3


def test_without_a_unet_every_block_runs_at_one_quarter():
    model = tiny(time_reduce_idx=None, time_recover_idx=None).eval()
    log_probs, lengths = model(torch.randn(1, 97, 20), torch.tensor([97]))

    assert model.time_reduction is None and model.time_recovery is None
    assert log_probs.shape == (1, 25, 11) and lengths.tolist() == [25]


def test_padded_batch_gives_each_example_its_own_outputs_in_eval_mode():
    ctc_steps.assert_padding_is_ignored(tiny().eval(), [97, 61, 23, 5], input_dim=20)


def test_gradients_reach_every_parameter():
    assert ctc_steps.parameters_without_gradient(tiny().train(), input_dim=20) == []


def test_tiny_model_overfits_one_batch_with_ctc():
    torch.manual_seed(0)
    model = squeezeformer_tiny(input_dim=20, vocab_size=11, dropout=0.0).train()
    features = torch.randn(2, 80, 20)
    lengths = torch.tensor([80, 64])  # -> 20 and 16 output frames
    targets = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 0]])
    target_lengths = torch.tensor([5, 4])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    losses = ctc_overfit_losses(model, optimizer, (features, lengths, targets, target_lengths), steps=40)

    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("size", ["xs", "s", "sm", "m", "ml", "l"])
def test_paper_sizes_have_the_papers_parameter_counts(size):
    # The paper counts with a 128-piece vocabulary; a 15 % band still catches a missing or doubled module
    # (dropping the conv module's 2x expansion alone costs XS 0.4 M, S 0.8 M).
    config = squeezeformer_config(size, input_dim=80, vocab_size=128)
    millions = count_parameters(config) / 1e6
    paper = SIZES[size].paper_params_millions

    assert abs(millions - paper) <= 0.15 * paper, f"{size}: {millions:.2f} M vs paper {paper} M"


def test_paper_sizes_use_the_papers_widths_and_unet_positions():
    xs, large = squeezeformer_config("xs"), squeezeformer_config("l")

    assert (xs.d_model, xs.num_layers, xs.num_heads) == (144, 16, 4)
    assert (xs.time_reduce_idx, xs.time_recover_idx) == (7, 15)
    assert (large.d_model, large.num_layers, large.num_heads) == (640, 22, 8)
    assert (large.time_reduce_idx, large.time_recover_idx) == paper_time_indices(22) == (10, 21)
    assert SqueezeformerConfig() == dataclasses.replace(xs, vocab_size=256, input_dim=80)


def test_tiny_and_demo_fit_a_cpu():
    tiny_config, demo = squeezeformer_config("tiny"), squeezeformer_config("demo")

    assert (tiny_config.d_model, tiny_config.num_layers, tiny_config.num_heads) == (32, 4, 2)
    assert (tiny_config.time_reduce_idx, tiny_config.time_recover_idx) == (1, 3)
    assert count_parameters(demo) < 5_000_000


def test_config_round_trips_through_json():
    config = squeezeformer_config("demo", vocab_size=129, dropout=0.05, time_recover_idx=None)
    restored = SqueezeformerConfig(**json.loads(json.dumps(dataclasses.asdict(config))))
    assert restored == config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_layers": 6}, "time_reduce_idx=7 must lie in"),
        ({"time_reduce_idx": 9, "time_recover_idx": 9}, "time_recover_idx=9 must lie in"),
        ({"time_reduce_idx": None}, "needs a time_reduce_idx"),
        ({"d_model": 30, "num_heads": 4}, "divisible"),
        ({"conv_kernel_size": 8}, "odd"),
    ],
)
def test_invalid_configs_are_rejected_with_a_hint(overrides, message):
    with pytest.raises(ValueError, match=message):
        SqueezeformerConfig(**overrides)


def test_wrong_feature_width_names_the_fix():
    ctc_steps.assert_wrong_feature_width_names_the_fix(tiny())


def test_log_probs_are_float32_under_bf16_autocast():
    ctc_steps.assert_float32_log_probs_under_bf16_autocast(tiny(), input_dim=20)
