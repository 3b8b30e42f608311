import dataclasses
import json

import pytest
import torch

from asr_pipeline.models.w2v_bert import (
    ACTIVATIONS,
    SIZES,
    W2VBertConfig,
    W2VBertCTC,
    build_w2v_bert,
    w2v_bert_config,
    w2v_bert_tiny,
)
from asr_pipeline.models.w2v_bert_spec import ACTIVATION_NAMES, W2V_BERT
from tests.models import ctc_steps
from tests.models.ctc_steps import ctc_loss, ctc_overfit_losses

POSITION_TYPES = ["relative_key", "relative", "rotary", None]
LENGTHS = [97, 61, 23, 5]  # primes and a near-empty one; 20 ms frames


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


def tiny(**overrides) -> W2VBertCTC:
    torch.manual_seed(0)
    return w2v_bert_tiny(input_dim=20, vocab_size=11, dropout=0.0, **overrides)


def count_parameters(config: W2VBertConfig) -> int:
    with torch.device("meta"):  # no memory, no init time: 600m has 580 M parameters
        return sum(p.numel() for p in build_w2v_bert(config).parameters())


def test_output_keeps_the_20ms_frame_rate_of_the_features():
    # Stacked fbank frames arrive at 20 ms and no layer strides: T' = T for every example.
    model = w2v_bert_tiny(vocab_size=11).eval()  # input_dim 160, the w2v-bert frontend's
    ctc_steps.assert_ctc_outputs(
        model, torch.randn(4, 97, 160), torch.tensor(LENGTHS), expected=LENGTHS, vocab_size=11
    )


@pytest.mark.parametrize(
    ("kernel", "layers", "expected"),
    [
        # Conv1d with padding stride // 2 = 1: T' = floor((T + 2 - kernel) / 2) + 1.
        # kernel 3: floor((T - 1) / 2) + 1 = ceil(T / 2), 20 -> 40 -> 80 ms:
        #   97 -> 49 -> 25,  61 -> 31 -> 16,  23 -> 12 -> 6,  5 -> 3 -> 2
        (3, 2, [25, 16, 6, 2]),
        # kernel 5: floor((T - 3) / 2) + 1: 97 -> 48, 61 -> 30, 23 -> 11, 5 -> 2
        (5, 1, [48, 30, 11, 2]),
    ],
)
def test_each_adapter_layer_halves_the_frame_rate(kernel, layers, expected):
    model = tiny(add_adapter=True, adapter_kernel_size=kernel, num_adapter_layers=layers).eval()
    lengths = torch.tensor(LENGTHS)

    log_probs, out_lengths = model(torch.randn(4, 97, 20), lengths)

    assert log_probs.shape == (4, expected[0], 11)
    assert out_lengths.tolist() == expected
    assert model.output_lengths(lengths).tolist() == expected


@pytest.mark.parametrize(
    "overrides",
    [
        *({"position_embeddings_type": kind} for kind in POSITION_TYPES),
        {"add_adapter": True, "num_adapter_layers": 2},
        {"add_adapter": True, "output_hidden_size": 48, "use_intermediate_ffn_before_adapter": True},
    ],
    ids=[*map(str, POSITION_TYPES), "adapter", "adapter-48-intermediate-ffn"],
)
def test_padded_batch_gives_each_example_its_own_outputs_in_eval_mode(overrides):
    ctc_steps.assert_padding_is_ignored(tiny(**overrides).eval(), LENGTHS, input_dim=20)


@pytest.mark.parametrize(
    "overrides",
    [
        *({"position_embeddings_type": kind} for kind in POSITION_TYPES),
        {"add_adapter": True, "output_hidden_size": 48, "use_intermediate_ffn_before_adapter": True},
        {"mask_time_prob": 0.5, "mask_time_length": 4},  # registers and uses masked_spec_embed
    ],
    ids=[*map(str, POSITION_TYPES), "adapter", "masked_spec_embed"],
)
def test_gradients_reach_every_parameter(overrides):
    assert ctc_steps.parameters_without_gradient(tiny(**overrides).train(), input_dim=20) == []


def test_tiny_model_overfits_one_batch_with_ctc():
    model = tiny().train()
    features, lengths = torch.randn(2, 40, 20), torch.tensor([40, 32])
    targets, target_lengths = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 0]]), torch.tensor([5, 4])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    losses = ctc_overfit_losses(model, optimizer, (features, lengths, targets, target_lengths), steps=60)

    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize("kind", POSITION_TYPES)
def test_each_position_type_registers_hfs_modules(kind):
    model = tiny(position_embeddings_type=kind)
    attention = model.wav2vec2_bert.encoder.layers[0].self_attn
    names = {name for name, _ in attention.named_parameters()}

    extra = {
        "relative_key": {"distance_embedding.weight"},
        "relative": {"linear_pos.weight", "pos_bias_u", "pos_bias_v"},
        "rotary": set(),
        None: set(),
    }[kind]
    assert names == {f"linear_{x}.{p}" for x in ("q", "k", "v", "out") for p in ("weight", "bias")} | extra
    if kind == "relative_key":  # distances -8..2 of tiny, one head-width (8) vector each
        assert attention.distance_embedding.weight.shape == (8 + 2 + 1, 8)
    assert hasattr(attention, "linear_pos") == (kind == "relative")
    has_positions = model.wav2vec2_bert.encoder.embed_positions is not None
    assert has_positions == (kind in ("relative", "rotary"))


def test_activation_checkpointing_recomputes_layers_and_gives_the_same_loss_and_gradients():
    features, lengths = torch.randn(2, 61, 20), torch.tensor([61, 40])
    results = []
    for checkpointed in (False, True):
        model = tiny(activation_checkpointing=checkpointed).train()
        calls: list[int] = []
        model.wav2vec2_bert.encoder.layers[0].register_forward_pre_hook(
            lambda *args, calls=calls: calls.append(1)
        )
        loss = ctc_loss(model, features, lengths)
        loss.backward()
        results.append((loss.detach(), {name: p.grad for name, p in model.named_parameters()}, len(calls)))

    (plain_loss, plain_grads, plain_calls), (ckpt_loss, ckpt_grads, ckpt_calls) = results
    assert (plain_calls, ckpt_calls) == (1, 2)  # the checkpointed layer ran again in backward
    torch.testing.assert_close(ckpt_loss, plain_loss, atol=1e-5, rtol=0)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(ckpt_grads[name], grad, atol=1e-5, rtol=1e-5, msg=name)


def test_training_replaces_masked_frames_with_the_learned_vector_and_eval_does_not():
    model = tiny(mask_time_prob=0.5, mask_time_length=4)
    seen = []
    model.wav2vec2_bert.encoder.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    embed = model.wav2vec2_bert.masked_spec_embed

    for mode in (model.train, model.eval):
        mode()
        model(torch.randn(2, 40, 20), torch.tensor([40, 24]))
    masked_rows = [(x == embed).all(-1) for x in seen]  # (B, T) each

    assert masked_rows[0][0].sum() >= 4 and masked_rows[0][1].sum() >= 4  # at least one 4-frame span
    assert not masked_rows[0][1, 24:].any() and not masked_rows[1].any()


def test_600m_has_the_published_parameter_count():
    # facebook/w2v-bert-2.0, d = 1024, I = 4096, K = 64, 24 layers, kernel 31, distances [-64, 8]:
    #   two FFNs          2 * (d*I + I + I*d + d)      = 16,787,456
    #   attention         4 * (d*d + d) + 73 * K       =  4,203,072
    #   conv module       2d*d + 31*d + d*d (no bias)  =  3,177,472
    #   six LayerNorms    6 * 2d                       =     12,288
    #   one layer                                      = 24,180,288; x 24 = 580,326,912
    #   feature projection  LayerNorm(160) + Linear(160, d) = 320 + 164,864 = 165,184
    # -> 580,492,096 encoder parameters: the checkpoint's 2.32 GB of float32, "600M" on the model card.
    config = w2v_bert_config("600m", vocab_size=256)
    head = 1024 * 256 + 256

    assert count_parameters(config) == 580_492_096 + head
    assert abs(580_492_096 - 600e6) / 600e6 < 0.04


def test_tiny_and_demo_fit_a_cpu():
    assert count_parameters(w2v_bert_config("tiny", vocab_size=256)) < 100_000
    assert 3_500_000 <= count_parameters(w2v_bert_config("demo", vocab_size=256)) <= 5_000_000


def test_spec_without_variant_is_600m_and_overrides_win():
    config = W2V_BERT.config_for(None, {"vocab_size": 129, "num_layers": 12, "dropout": 0.0})

    assert config == w2v_bert_config("600m", vocab_size=129, num_layers=12, dropout=0.0)
    assert (config.d_model, config.num_heads, config.intermediate_size) == (1024, 16, 4096)
    assert config.num_layers == 12
    assert W2V_BERT.config_for("demo", {}) == w2v_bert_config("demo")
    assert W2V_BERT.variants == tuple(SIZES) == ("600m", "tiny", "demo")
    assert (W2V_BERT.frontend, W2V_BERT.input_dim, W2V_BERT.output) == ("w2v-bert", 160, "ctc")
    assert W2V_BERT.peak_learning_rate(None) == W2V_BERT.peak_learning_rate("demo") == 1e-4
    assert isinstance(W2V_BERT.builder(w2v_bert_config("tiny")), W2VBertCTC)


def test_the_activations_the_config_accepts_are_the_ones_the_model_builds():
    assert tuple(ACTIVATIONS) == ACTIVATION_NAMES
    with pytest.raises(ValueError, match="hidden_act='elu' is not implemented; choose one of: relu, gelu"):
        w2v_bert_config("tiny", hidden_act="elu")


def test_unset_dropouts_follow_dropout_and_set_ones_win():
    config = w2v_bert_config("tiny", dropout=0.2, conformer_conv_dropout=0.0)
    model = build_w2v_bert(config)
    layer = model.wav2vec2_bert.encoder.layers[0]

    assert config.rate("hidden_dropout") == config.rate("final_dropout") == 0.2
    assert layer.ffn1.output_dropout.p == model.dropout.p == 0.2
    assert layer.conv_module.dropout.p == 0.0
    assert layer.self_attn.dropout == layer.self_attn_dropout.p == 0.0  # HF's default, not dropout's


def test_config_round_trips_through_json():
    config = w2v_bert_config("demo", vocab_size=129, position_embeddings_type=None, add_adapter=True)
    restored = W2VBertConfig(**json.loads(json.dumps(dataclasses.asdict(config))))
    assert restored == config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"position_embeddings_type": "absolute"}, "position_embeddings_type must be one of"),
        ({"hidden_act": "quick_gelu"}, "hidden_act='quick_gelu' is not implemented"),
        ({"conv_depthwise_kernel_size": 8}, "odd"),
        ({"d_model": 30, "num_heads": 4}, "divisible"),
        ({"use_intermediate_ffn_before_adapter": True}, "needs add_adapter"),
        ({"relative_key_attention": "sparse"}, "relative_key_attention must be one of"),
        ({"relative_key_attention": "flex", "attention_dropout": 0.1}, "set attention_dropout=0"),
        ({"relative_key_attention": "flex", "d_model": 32, "num_heads": 4}, "at least 16 wide"),
        ({"relative_key_attention": "flex", "position_embeddings_type": "rotary"}, "fuses relative_key"),
        ({"relative_key_attention": "flex", "attention_dropout": None, "dropout": 0.1}, "got 0.1"),
    ],
)
def test_invalid_configs_are_rejected_with_a_hint(overrides, message):
    with pytest.raises(ValueError, match=message):
        W2VBertConfig(**overrides)


def test_wrong_feature_width_names_the_fix():
    ctc_steps.assert_wrong_feature_width_names_the_fix(tiny())


def test_log_probs_are_float32_under_bf16_autocast():
    ctc_steps.assert_float32_log_probs_under_bf16_autocast(tiny(), input_dim=20)
