"""models.hubert_import: torchaudio's and Hugging Face's HuBERT models load into ours and give the same outputs,
old weight-norm names included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torchaudio

from asr_kernels.masks import padding_mask
from asr_pipeline.models.hubert import HubertConfig, HubertCTC, HubertPretrain
from asr_pipeline.models.hubert_import import (
    hf_config_values,
    load_hf_weights,
    load_torchaudio_state,
    torchaudio_config_values,
)
from tests.models.test_hubert import NO_DROPOUT, waveform_batch

transformers = pytest.importorskip("transformers")

TINY_CONV = [(16, 10, 5), (16, 4, 4), (16, 4, 4), (16, 2, 2), (16, 2, 2)]  # 320 samples per frame


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
