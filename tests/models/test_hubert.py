"""HuBERT (models.hubert, models.hubert_import): torchaudio's and Hugging Face's models load into ours and give
the same outputs; the recipe's span masking; the pretraining loss and the CTC head's shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torchaudio

from asr_kernels.masks import padding_mask
from asr_pipeline.models.hubert import (
    HubertConfig,
    HubertCTC,
    HubertPretrain,
    conv_output_lengths,
    hubert_config,
    span_mask,
)
from asr_pipeline.models.hubert_import import (
    hf_config_values,
    load_hf_weights,
    load_torchaudio_state,
    torchaudio_config_values,
)

transformers = pytest.importorskip("transformers")

TINY_CONV = [(16, 10, 5), (16, 4, 4), (16, 4, 4), (16, 2, 2), (16, 2, 2)]  # 320 samples per frame
NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0}


def torchaudio_arguments(**overrides) -> dict:
    arguments = dict(
        extractor_mode="group_norm", extractor_conv_layer_config=TINY_CONV, extractor_conv_bias=False,
        encoder_embed_dim=32, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=16, encoder_pos_conv_groups=2,
        encoder_num_layers=2, encoder_num_heads=2, encoder_attention_dropout=0.0, encoder_ff_interm_features=64,
        encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0,
        mask_prob=0.8, mask_selection="static", mask_other=0.0, mask_length=10, no_mask_overlap=False,
        mask_min_space=1, mask_channel_prob=0.0, mask_channel_selection="static", mask_channel_other=0.0,
        mask_channel_length=10, no_mask_channel_overlap=False, mask_channel_min_space=1, skip_masked=False,
        skip_nomask=False, num_classes=10, final_dim=8, feature_grad_mult=None,
    )  # fmt: skip
    return arguments | overrides


def waveform_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(3, 50, 320) waveform frames (1 s) and (3,) frame counts: one full row and two padded ones."""
    generator = torch.Generator().manual_seed(seed)
    frames = torch.randn(3, 50, 320, generator=generator)
    lengths = torch.tensor([50, 40, 25])
    return frames * ~padding_mask(lengths, 50)[..., None], lengths


LAYOUTS = [
    pytest.param({}, id="base-style: group norm, post-LN"),
    pytest.param(
        {"extractor_mode": "layer_norm", "encoder_layer_norm_first": True, "extractor_conv_bias": True},
        id="large-style: layer norm, pre-LN, conv bias",
    ),
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_torchaudio_hubert_loads_into_ours_with_the_same_outputs(layout):
    arguments = torchaudio_arguments(**layout)
    torch.manual_seed(0)
    theirs = torchaudio.models.hubert_pretrain_model(**arguments).eval()
    ours = HubertPretrain(HubertConfig(**torchaudio_config_values(arguments) | NO_DROPOUT)).eval()
    report = load_torchaudio_state(ours, theirs.state_dict(), verbose=False)
    assert not report.skipped and not report.left_at_init

    frames, lengths = waveform_batch()
    with torch.no_grad():
        their_layers, their_lengths = theirs.wav2vec2.extract_features(frames.reshape(3, -1), lengths * 320)
        our_layers, our_lengths = ours.hubert.extract_features(frames, lengths)
        their_output, _ = theirs.wav2vec2(frames.reshape(3, -1), lengths * 320)
        _, projected, _ = ours.hubert.features(frames, lengths)
        our_output = ours.hubert.encode(projected, our_lengths)
    assert our_lengths.tolist() == their_lengths.tolist() == [49, 39, 24]
    real = ~padding_mask(our_lengths, 49)
    for theirs_layer, ours_layer in zip(their_layers, our_layers, strict=True):
        torch.testing.assert_close(ours_layer[real], theirs_layer[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(our_output[real], their_output[real], atol=1e-5, rtol=0)

    # The pretraining logits: theirs put the positive first among all classes, ours are the classes in order.
    labels = torch.randint(0, 10, (3, 49), generator=torch.Generator().manual_seed(1))
    mask = real.clone()
    mask[:, :5] = False
    with torch.no_grad():
        logit_m, _ = theirs.logit_generator(our_output, labels, mask, real & ~mask)
        their_ce = F.cross_entropy(logit_m, torch.zeros(len(logit_m), dtype=torch.long), reduction="sum")
        our_ce = F.cross_entropy(ours.logits(our_output)[mask], labels[mask], reduction="sum")
    torch.testing.assert_close(our_ce, their_ce, atol=1e-4, rtol=1e-6)


def hf_config(**overrides):
    values = dict(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=[c for c, _, _ in TINY_CONV], conv_kernel=[k for _, k, _ in TINY_CONV],
        conv_stride=[s for _, _, s in TINY_CONV], num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0,
        vocab_size=12,
    )  # fmt: skip
    return transformers.HubertConfig(**(values | overrides))


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param({}, id="base-style"),
        pytest.param(
            {"feat_extract_norm": "layer", "do_stable_layer_norm": True, "conv_bias": True}, id="large-style"
        ),
    ],
)
def test_a_hugging_face_hubert_folder_loads_into_ours_with_the_same_hidden_states(layout, tmp_path):
    torch.manual_seed(0)
    hf = transformers.HubertForCTC(hf_config(**layout)).eval()
    hf.save_pretrained(tmp_path)
    values = hf_config_values(tmp_path)
    assert values["vocab_size"] == 12 and values["layer_norm_first"] == bool(layout)
    ours = HubertCTC(HubertConfig(**values | NO_DROPOUT, mask_prob=0.0)).eval()
    report = load_hf_weights(ours, tmp_path, verbose=False)
    assert not report.left_at_init, report.left_at_init
    assert [name for name, _ in report.skipped] in ([], ["hubert.masked_spec_embed"])

    frames, lengths = waveform_batch()
    mask = (~padding_mask(lengths, 50)).repeat_interleave(320, dim=1).long()  # (B, N) attention mask
    with torch.no_grad():
        output = hf(frames.reshape(3, -1), attention_mask=mask, output_hidden_states=True)
        layers, out_lengths = ours.hubert.extract_features(frames, lengths)
        log_probs, _ = ours(frames, lengths)
    real = ~padding_mask(out_lengths, 49)
    for index, layer in enumerate(layers):  # HF's hidden_states[0] is the transformer's input
        torch.testing.assert_close(layer[real], output.hidden_states[index + 1][real], atol=1e-4, rtol=0)
    torch.testing.assert_close(log_probs[real], output.logits.log_softmax(-1)[real], atol=1e-4, rtol=0)


def test_old_weight_norm_names_load_as_the_parametrization():
    arguments = torchaudio_arguments()
    theirs = torchaudio.models.hubert_pretrain_model(**arguments)
    state = theirs.state_dict()
    prefix = "wav2vec2.encoder.transformer.pos_conv_embed.conv."
    state[prefix + "weight_g"] = state.pop(prefix + "parametrizations.weight.original0")
    state[prefix + "weight_v"] = state.pop(prefix + "parametrizations.weight.original1")
    ours = HubertPretrain(HubertConfig(**torchaudio_config_values(arguments)))
    report = load_torchaudio_state(ours, state, verbose=False)
    assert not report.skipped and not report.left_at_init


def test_the_conv_stack_turns_samples_into_50_hz_frames():
    config = HubertConfig()  # base: (512, 10, 5) then 3-2 x4 and 2-2 x2
    # 16000 samples: (16000-10)//5+1 = 3199 -> 1599 -> 799 -> 399 -> 199 -> 99 -> 49
    assert conv_output_lengths(config, torch.tensor([16000, 400, 399, 0])).tolist() == [49, 1, 0, 0]
    assert config.stride == 320


def test_span_masks_cover_the_recipe_share_within_each_length():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([500] * 20 + [30, 5])
    mask = span_mask(lengths, 500, 0.8, 10, 2, generator)
    share = mask[:20].float().mean().item()
    assert 0.50 < share < 0.60  # 1 - exp(-0.8) = 0.55 for overlapping spans
    assert not mask[20, 30:].any() and not mask[21, 5:].any()  # never past a length
    assert mask[21].sum() == 5  # a row shorter than a span is masked whole (min_masks 2)


def test_pretraining_learns_the_units_of_a_tiny_batch():
    torch.manual_seed(0)
    model = HubertPretrain(hubert_config("tiny", **NO_DROPOUT, num_classes=5))
    frames, lengths = waveform_batch()
    labels = (torch.arange(49) // 10 % 5).repeat(3, 1)  # (3, 49) five units in runs
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        out = model(frames, lengths, labels)
        loss = out["loss"].sum() / out["predicted_frames"].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]
    assert out["correct_masked"].sum() > 0.8 * out["masked_frames"].sum()


def test_the_feature_gradient_is_scaled():
    grads = []
    for mult in (1.0, 0.1):
        torch.manual_seed(0)
        model = HubertPretrain(
            hubert_config("tiny", **NO_DROPOUT, feature_grad_mult=mult, feature_penalty_weight=0.0)
        )
        frames, lengths = waveform_batch()
        mask = ~padding_mask(torch.tensor([49, 39, 24]), 49)
        model(frames, lengths, torch.zeros(3, 49, dtype=torch.long), mask=mask)["loss"].sum().backward()
        grads.append(model.hubert.feature_extractor.conv_layers[0].conv.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0] * 0.1)


def test_the_ctc_head_masks_only_in_training():
    torch.manual_seed(0)
    model = HubertCTC(hubert_config("tiny", vocab_size=7, mask_prob=0.5))
    frames, lengths = waveform_batch()
    model.eval()
    with torch.no_grad():
        first, out_lengths = model(frames, lengths)
        second, _ = model(frames, lengths)
    assert first.shape == (3, 49, 7) and out_lengths.tolist() == [49, 39, 24]
    assert torch.equal(first, second)
