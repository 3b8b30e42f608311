import dataclasses
import json
import math

import pytest
import torch

from asr_kernels.pairwise_downsample import PairwiseDownsample
from asr_kernels.swoosh import SWOOSH_FORMS, Swoosh, swoosh_l, swoosh_r
from asr_pipeline.models import zipformer_spec
from asr_pipeline.models.zipformer import (
    SIZES,
    Zipformer,
    ZipformerConfig,
    build_zipformer,
    zipformer_config,
    zipformer_tiny,
)
from asr_pipeline.models.zipformer_spec import ZIPFORMER
from tests.models import ctc_steps
from tests.models.ctc_steps import ctc_overfit_losses


def tiny(**overrides) -> Zipformer:
    torch.manual_seed(0)
    return zipformer_tiny(input_dim=20, vocab_size=11, **overrides)


def count_parameters(config: ZipformerConfig) -> int:
    with torch.device("meta"):  # no memory, no init time: Zipformer-L has 147 M parameters
        return sum(p.numel() for p in build_zipformer(config).parameters())


def test_output_shapes_and_lengths_on_prime_lengths():
    # Frames per stage for the longest example, 97 input frames (10 ms):
    #   front end:  (97 - 7) // 2 = 45                     (20 ms, 50 Hz)
    #   stacks:     45 / (1, 2, 4, 8, 4, 2), rounded up = 45, 23, 12, 6, 12, 23, each upsampled back to 45
    #   output:     ceil(45 / 2) = 23                      (40 ms, 25 Hz)
    # The others: 61 -> 27 -> 14; 23 -> 8 -> 4; 9 -> 1 -> 1 (9 frames is the shortest input).
    model = tiny().eval()
    features = torch.randn(4, 97, 20)
    lengths = torch.tensor([97, 61, 23, 9])

    ctc_steps.assert_ctc_outputs(model, features, lengths, expected=[23, 14, 4, 1], vocab_size=11)


@pytest.mark.parametrize(
    ("factor", "expected"), [(1, [45, 27, 8, 1]), (2, [23, 14, 4, 1]), (4, [12, 7, 2, 1])]
)
def test_output_downsampling_factor_sets_the_ctc_frame_rate(factor, expected):
    # The 50 Hz lengths 45, 27, 8, 1 divided by the factor, rounded up; factor 1 has no output downsampling
    # module at all (CTC at 50 Hz, for fast speech in near-character pieces).
    model = tiny(output_downsampling_factor=factor).eval()
    lengths = torch.tensor([97, 61, 23, 9])

    log_probs, out_lengths = model(torch.randn(4, 97, 20), lengths)

    assert out_lengths.tolist() == expected == model.output_lengths(lengths).tolist()
    assert log_probs.shape == (4, expected[0], 11)
    assert (model.downsample_output is None) == (factor == 1)


def test_each_stack_runs_at_its_downsampling_factor_and_its_own_width():
    model = tiny().eval()
    layer_inputs, stack_outputs = [], []
    for stack in model.stacks:
        stack.layers[0].register_forward_hook(
            lambda module, args, out: layer_inputs.append(args[0].shape[1:])
        )
        stack.register_forward_hook(lambda module, args, out: stack_outputs.append(out.shape[1:]))

    model(torch.randn(1, 97, 20), torch.tensor([97]))

    # 45 frames at 50 Hz over factors (1, 2, 4, 8, 4, 2); tiny's widths are (32, 48, 48, 48, 48, 32).
    assert layer_inputs == [(45, 32), (23, 48), (12, 48), (6, 48), (12, 48), (23, 32)]
    assert stack_outputs == [(45, 32), (45, 48), (45, 48), (45, 48), (45, 48), (45, 32)]


@pytest.mark.parametrize(
    ("normalization", "output_factor"), [("utterance", 2), (None, 2), ("utterance", 1), ("utterance", 3)]
)
def test_padded_batch_gives_each_example_its_own_outputs_in_eval_mode(normalization, output_factor):
    # Without input normalization the loud padding reaches the front end itself. 50 Hz lengths 45, 27, 8,
    # 1 are odd, so every downsampling has a group straddling the end of each utterance.
    model = tiny(input_normalization=normalization, output_downsampling_factor=output_factor).eval()
    ctc_steps.assert_padding_is_ignored(model, [97, 61, 23, 9], input_dim=20)


def test_downsampling_repeats_each_utterances_last_frame_like_icefall():
    # In a batch the frames after a shorter utterance's end must not count: a group averages only the
    # real frames it holds, with the softmax weights renormalised over them (the same as the lone utterance).
    torch.manual_seed(0)
    downsample = PairwiseDownsample(4)
    downsample.bias.data = torch.tensor([0.1, -0.3, 0.7, 0.2])
    x = torch.randn(2, 7, 3)
    x[1, 5:] = 1000.0  # padding of the second utterance (5 real frames)

    out = downsample(x, torch.tensor([7, 5]))

    weights = downsample.bias.softmax(0)
    first = (x[1, :4] * weights[:, None]).sum(0)  # a full group
    second = x[1, 4]  # one real frame: its weight renormalised to 1
    assert out.shape == (2, 2, 3)
    torch.testing.assert_close(out[1], torch.stack([first, second]))
    alone = downsample(x[1:, :5], torch.tensor([5]))
    torch.testing.assert_close(out[1], alone[0])


def test_gradients_reach_every_parameter():
    assert ctc_steps.parameters_without_gradient(tiny().train(), input_dim=20) == []


def test_tiny_model_overfits_one_batch_with_ctc_and_the_recipes_adamw():
    torch.manual_seed(0)
    model = zipformer_tiny(input_dim=20, vocab_size=11, dropout=0.0).train()  # feature masking stays on
    features = torch.randn(2, 80, 20)
    lengths = torch.tensor([80, 64])  # -> 36 and 28 at 50 Hz -> 18 and 14 output frames
    targets = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 0]])
    target_lengths = torch.tensor([5, 4])
    # Plain AdamW at the recipe's peak, 1e-3, from the initialisation (no warm-up, no ScaledAdam):
    # 6.5 -> 1.05 here; the first halving (the all-blank plateau near 3) is reached by step ~20.
    optimizer = torch.optim.AdamW(model.parameters(), lr=ZIPFORMER.peak_learning_rate("tiny"))

    losses = ctc_overfit_losses(model, optimizer, (features, lengths, targets, target_lengths), steps=60)

    assert losses[-1] < 0.5 * losses[0], losses


def test_swoosh_matches_the_papers_formulas():
    x = torch.tensor([-10.0, -1.0, 0.0, 1.0, 4.0, 10.0], dtype=torch.float64)
    expected_l = [math.log1p(math.exp(v - 4)) - 0.08 * v - 0.035 for v in x.tolist()]
    expected_r = [math.log1p(math.exp(v - 1)) - 0.08 * v - 0.313261687 for v in x.tolist()]

    torch.testing.assert_close(swoosh_l(x), torch.tensor(expected_l, dtype=torch.float64))
    torch.testing.assert_close(swoosh_r(x), torch.tensor(expected_r, dtype=torch.float64))
    assert abs(swoosh_r(torch.tensor(0.0)).item()) < 1e-6  # SwooshR(0) = log(1 + 1/e) - 0.313261687 = 0
    big = torch.tensor([-1e4, 1e4])  # softplus: no overflow where exp(x - 1) would be inf
    torch.testing.assert_close(
        swoosh_r(big), torch.tensor([0.08e4 - 0.313261687, 1e4 - 1 - 0.08e4 - 0.313261687])
    )


def test_sigmoid_swoosh_is_the_reference_trainers_different_function():
    x = torch.tensor([-10.0, 0.5, 3.0])
    torch.testing.assert_close(Swoosh("l", "sigmoid")(x), x * torch.sigmoid(x - 4))
    torch.testing.assert_close(Swoosh("r", "sigmoid")(x), x * torch.sigmoid(x - 1))
    # At -10 the paper's curves still slope (-0.08 x), the shifted Swish has flattened to ~0:
    #   SwooshL(-10) = log(1 + e^-14) + 0.8 - 0.035 = 0.765;  -10 * sigmoid(-14) = -8.3e-6
    #   SwooshR(-10) = log(1 + e^-11) + 0.8 - 0.313 = 0.487;  -10 * sigmoid(-11) = -1.7e-4
    at = torch.tensor([-10.0])
    assert (Swoosh("l", "paper")(at) - Swoosh("l", "sigmoid")(at)).item() == pytest.approx(0.765, abs=1e-3)
    assert (Swoosh("r", "paper")(at) - Swoosh("r", "sigmoid")(at)).item() == pytest.approx(0.487, abs=1e-3)


def test_the_configs_swoosh_forms_are_the_kernels():
    # The torch-free config checks its swoosh field against its own copy of the kernel's forms.
    assert zipformer_spec.SWOOSH_FORMS == SWOOSH_FORMS
    with pytest.raises(ValueError, match="swoosh must be one of"):
        zipformer_spec.zipformer_config("tiny", swoosh="relu")


def test_sigmoid_swoosh_option_reaches_the_model():
    features, lengths = torch.randn(1, 40, 20), torch.tensor([40])
    with torch.no_grad():
        paper, _ = tiny().eval()(features, lengths)
        sigmoid, _ = tiny(swoosh="sigmoid").eval()(features, lengths)  # same seed, same weights
    assert not torch.allclose(paper, sigmoid, atol=1e-4)


# icefall's encoder parameter counts (encoder_embed + encoder) from egs/librispeech/ASR/RESULTS.md, "zipformer
# (zipformer + pruned stateless transducer)", whose totals include a stateless transducer with vocabulary
# 500, decoder_dim = joiner_dim = 512, context_size 2 (train.py defaults). Those extra parts:
#   decoder.embedding        500 x 512                              =   256,000
#   decoder.conv             Conv1d(512, 512, k=2, groups=128, no bias): 512 x 4 x 2 = 4,096
#   joiner.decoder_proj      512 x 512 + 512                        =   262,656
#   joiner.output_linear     512 x 500 + 500                        =   256,500
#   simple_lm_proj           512 x 500 + 500                        =   256,500
#   joiner.encoder_proj      E x 512 + 512, E = max(encoder_dim)
#   simple_am_proj           E x 500 + 500
# so extra = 1,035,752 + 1,012 E + 1,012:
#   S (E 256):  23,285,615 - (1,035,752 + 259,072 + 1,012) =  23,285,615 - 1,295,836 =  21,989,779
#   M (E 512):  65,549,011 - (1,035,752 + 518,144 + 1,012) =  65,549,011 - 1,554,908 =  63,994,103
#   L (E 768): 148,439,574 - (1,035,752 + 777,216 + 1,012) = 148,439,574 - 1,813,980 = 146,625,594
# Cross-check: icefall's Zipformer-S audio tagger (egs/audioset/AT/RESULTS.md, 22,125,218 with a
# Linear(256, 527) classifier, 135,439) gives the same S encoder, 22,125,218 - 135,439 = 21,989,779.
# (The paper's 23.3 / 65.5 / 148.4 M are these totals, transducer included.)
ICEFALL_ENCODER_PARAMS = {"s": 21_989_779, "m": 63_994_103, "l": 146_625_594}


@pytest.mark.parametrize("size", ["s", "m", "l"])
def test_icefall_sizes_have_icefalls_encoder_parameter_counts(size):
    config = zipformer_config(size, input_dim=80, vocab_size=500)
    ctc_head = (max(config.encoder_dim) + 1) * 500  # our CTC output layer, not part of icefall's encoder
    encoder = count_parameters(config) - ctc_head

    assert ICEFALL_ENCODER_PARAMS[size] == SIZES[size].icefall_encoder_params
    assert abs(encoder - ICEFALL_ENCODER_PARAMS[size]) <= 0.02 * ICEFALL_ENCODER_PARAMS[size], encoder
    # Closer than 2 %: all of icefall's parameters but one unused 'bypass_scale' vector per layer.
    unused = sum(n * d for n, d in zip(config.num_encoder_layers, config.encoder_dim, strict=True))
    assert encoder == ICEFALL_ENCODER_PARAMS[size] - unused


def test_icefall_sizes_use_icefalls_stack_shapes():
    small, medium, large = zipformer_config("s"), zipformer_config("m"), zipformer_config("l")

    assert medium == ZipformerConfig()  # the dataclass defaults are icefall's train.py defaults (M)
    assert medium.num_encoder_layers == (2, 2, 3, 4, 3, 2)
    assert medium.encoder_dim == (192, 256, 384, 512, 384, 256)
    assert medium.num_heads_per_stack == (4, 4, 4, 8, 4, 4)
    assert medium.cnn_module_kernel == (31, 31, 15, 15, 15, 31)
    assert small.encoder_dim == (192, 256, 256, 256, 256, 256)
    assert small.feedforward_dim == (512, 768, 768, 768, 768, 768)
    assert large.num_encoder_layers == (2, 2, 4, 5, 4, 2)
    assert large.encoder_unmasked_dim == (192, 192, 256, 320, 256, 192)
    assert {config.downsampling_factor for config in (small, medium, large)} == {(1, 2, 4, 8, 4, 2)}


def test_tiny_and_demo_fit_a_cpu():
    assert count_parameters(zipformer_config("tiny", input_dim=20, vocab_size=11)) < 400_000
    demo = count_parameters(zipformer_config("demo", input_dim=80, vocab_size=257))
    assert 3_500_000 <= demo <= 5_000_000, demo  # Squeezeformer demo: 3.7 M


def test_config_round_trips_through_json():
    config = zipformer_config(
        "demo", vocab_size=129, dropout=0.05, swoosh="sigmoid", input_normalization=None
    )
    saved = json.loads(json.dumps(dataclasses.asdict(config)))  # tuples come back as lists

    assert isinstance(saved["encoder_dim"], list)
    assert ZipformerConfig(**saved) == config  # the config turns lists back into tuples
    restored = ZipformerConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})
    assert restored == config  # what models.registry.config_from_dict hands it
    per_stack = [
        f.name for f in dataclasses.fields(ZipformerConfig) if isinstance(getattr(config, f.name), tuple)
    ]
    assert all(
        isinstance(f.default, tuple) for f in dataclasses.fields(ZipformerConfig) if f.name in per_stack
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_encoder_layers": (2, 2, 3)}, "has 3 entries but downsampling_factor"),
        ({"encoder_unmasked_dim": (192, 192, 256, 600, 256, 192)}, r"encoder_unmasked_dim\[3\]=600 exceeds"),
        ({"cnn_module_kernel": (31, 31, 15, 16, 15, 31)}, "odd"),
        ({"downsampling_factor": (1, 2, 0, 8, 4, 2)}, "integer >= 1 per stack"),
        ({"swoosh": "swish"}, "swoosh must be one of"),
        ({"pos_dim": 47}, "pos_dim must be even"),
        ({"input_normalization": "global"}, "input_normalization"),
        ({"input_dim": 5}, "at least 7 feature bins"),
        ({"feature_mask_prob": 1.0}, r"must lie in \[0, 1\)"),
        ({"output_downsampling_factor": 0}, "output_downsampling_factor must be an integer >= 1"),
        ({"output_downsampling_factor": 1.5}, "output_downsampling_factor must be an integer >= 1"),
    ],
)
def test_invalid_configs_are_rejected_with_a_hint(overrides, message):
    with pytest.raises(ValueError, match=message):
        ZipformerConfig(**overrides)


def test_config_has_no_flat_size_fields():
    names = {field.name for field in dataclasses.fields(ZipformerConfig)}
    assert {"input_dim", "vocab_size", "dropout"} <= names
    assert not names & {"d_model", "num_layers", "num_heads"}  # per stack here, flat ints elsewhere


def test_wrong_feature_width_names_the_fix():
    ctc_steps.assert_wrong_feature_width_names_the_fix(tiny())


def test_utterances_under_nine_frames_are_refused_with_the_minimum():
    model = tiny().eval()
    with pytest.raises(ValueError, match="at least 9 input frames"):
        model(torch.randn(2, 40, 20), torch.tensor([40, 8]))
    with pytest.raises(ValueError, match="at least 9 input frames"):
        model(torch.randn(1, 8, 20), torch.tensor([8]))
    assert model(torch.randn(1, 9, 20), torch.tensor([9]))[0].shape == (1, 1, 11)


def test_feature_masks_drop_only_channels_past_the_unmasked_dim_and_only_in_training():
    model = tiny(feature_mask_prob=0.5).train()
    x = torch.randn(64, 10, 32)
    masks = model.feature_masks(x)

    for mask, dim, unmasked in zip(masks, (32, 48, 48, 48, 48, 32), (32,) * 6, strict=True):
        assert mask.shape == (64, 1, dim)
        assert bool((mask[..., :unmasked] == 1).all())
    middle = 32 + (48 - 32) // 2
    first, second = masks[1][:, 0, 32], masks[1][:, 0, middle]
    assert 0 < int((first == 0).sum()) < 64
    assert bool((second <= first).all())  # the outer half is dropped whenever the inner one is
    assert model.eval().feature_masks(x) == [None] * 6


def test_log_probs_are_float32_under_bf16_autocast():
    ctc_steps.assert_float32_log_probs_under_bf16_autocast(tiny(), input_dim=20)


def test_spec_defaults_to_icefalls_m_and_overrides_win():
    default = ZIPFORMER.config_for(None, {"input_dim": 80, "vocab_size": 500})
    small = ZIPFORMER.config_for("s", {"input_dim": 80, "vocab_size": 257, "encoder_dim": (192,) * 6})

    assert default == zipformer_config("m", input_dim=80, vocab_size=500)
    assert small.encoder_dim == (192,) * 6 and small.vocab_size == 257
    assert small.feedforward_dim == SIZES["s"].feedforward_dim


def test_spec_describes_a_ctc_model_on_80_bin_fbank():
    assert ZIPFORMER.name == "zipformer"
    assert ZIPFORMER.variants == ("s", "m", "l", "tiny", "demo")
    assert ZIPFORMER.config_type is ZipformerConfig
    assert (ZIPFORMER.frontend, ZIPFORMER.input_dim, ZIPFORMER.output) == ("fbank", 80, "ctc")
    assert {ZIPFORMER.peak_learning_rate(v) for v in (None, *ZIPFORMER.variants)} == {1e-3}
    assert "encoder_dim" in ZIPFORMER.option_fields
    model = ZIPFORMER.builder(ZIPFORMER.config_for("tiny", {"input_dim": 80, "vocab_size": 7}))
    assert isinstance(model, Zipformer) and model.output.out_features == 7


def test_activation_constraints_change_no_forward_and_no_weights_and_only_add_gradient():
    from asr_pipeline.modules.activation_constraints import Balancer, Whiten

    plain, constrained = (
        tiny(dropout=0.0, feature_mask_prob=0.0),
        tiny(dropout=0.0, feature_mask_prob=0.0, activation_constraints=True),
    )
    kinds = [type(m) for m in constrained.modules()]
    # per layer: 3 feed-forward Balancers + balancer1, balancer2; 3 feed-forward Whitens + the layer's
    layers = sum(config_layers for config_layers in constrained.config.num_encoder_layers)
    assert (kinds.count(Balancer), kinds.count(Whiten)) == (5 * layers, 4 * layers)
    assert plain.state_dict().keys() == constrained.state_dict().keys()  # no parameters: same checkpoints
    constrained.load_state_dict(plain.state_dict())
    for module in constrained.modules():  # every constraint applies on this forward
        if isinstance(module, Balancer | Whiten):
            module.prob = 1.0
    features = torch.randn(2, 60, 20, generator=torch.Generator().manual_seed(5))
    lengths = torch.tensor([60, 41])

    outputs = [model.train()(features, lengths)[0] for model in (plain, constrained)]
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=0)
    for out in outputs:
        out[0, :5].sum().backward()
    grads = [{n: p.grad for n, p in model.named_parameters()} for model in (plain, constrained)]
    assert all(grads[1][name] is not None for name in grads[0])
    assert any(not torch.equal(grads[0][n], grads[1][n]) for n in grads[0]), (
        "the constraints moved a gradient"
    )
