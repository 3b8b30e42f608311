"""Our W2V-BERT against transformers' Wav2Vec2BertModel / Wav2Vec2BertForCTC, from checkpoints saved with
save_pretrained: same config, same weights, same hidden states and CTC outputs."""

import json
import re

import pytest
import torch
from safetensors.torch import load_file, save_file

from asr_pipeline.models.w2v_bert import W2VBertConfig, W2VBertCTC, build_w2v_bert
from asr_pipeline.models.w2v_bert_hf import config_from_hf, load_hf_weights

transformers = pytest.importorskip("transformers")

LENGTHS = [37, 30, 17]  # padded batch, 20 ms frames
INPUT_DIM = 20


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/models/conftest.py


def hf_config(**overrides) -> "transformers.Wav2Vec2BertConfig":
    values = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        conv_depthwise_kernel_size=5,
        feature_projection_input_dim=INPUT_DIM,  # a non-default input width imports fine
        left_max_position_embeddings=6,  # the 37-frame batch reaches both clips
        right_max_position_embeddings=3,
        attn_implementation="eager",  # HF's reference attention path
    )
    return transformers.Wav2Vec2BertConfig(**{**values, **overrides})


def save_hf(tmp_path, model_class, **overrides):
    torch.manual_seed(0)
    model = model_class(hf_config(**overrides)).eval()
    model.save_pretrained(tmp_path)  # model.safetensors + config.json
    return model


def ours_from(path, **overrides) -> W2VBertCTC:
    values = {"vocab_size": 7, **config_from_hf(path), **overrides}
    torch.manual_seed(1)
    return build_w2v_bert(W2VBertConfig(**values)).eval()


def padded_batch():
    torch.manual_seed(2)
    lengths = torch.tensor(LENGTHS)
    features = torch.randn(len(LENGTHS), max(LENGTHS), INPUT_DIM)
    attention_mask = (torch.arange(max(LENGTHS))[None, :] < lengths[:, None]).long()  # (B, T) 1 = real
    return features, lengths, attention_mask


@pytest.mark.parametrize(
    "overrides",
    [
        {"position_embeddings_type": "relative_key"},
        {"position_embeddings_type": "relative"},
        {"position_embeddings_type": "rotary"},
        {"position_embeddings_type": None},
    ],
    ids=["relative_key", "relative", "rotary", "None"],
)
def test_hidden_states_match_wav2vec2_bert_model(tmp_path, overrides):
    hf = save_hf(tmp_path, transformers.Wav2Vec2BertModel, **overrides)
    ours = ours_from(tmp_path)
    report = load_hf_weights(ours, tmp_path)

    encoder = [name for name in ours.state_dict() if name.startswith("wav2vec2_bert.")]
    assert sorted(report.loaded) == sorted(encoder)
    assert "wav2vec2_bert.masked_spec_embed" in report.loaded  # HF's default mask_time_prob 0.05
    assert report.skipped == ()
    assert report.left_at_init == ("lm_head.weight", "lm_head.bias")

    features, lengths, attention_mask = padded_batch()
    with torch.no_grad():
        theirs = hf(features, attention_mask=attention_mask).last_hidden_state
        hidden, out_lengths = ours.encode(features, lengths)

    assert out_lengths.tolist() == LENGTHS
    worst = max((hidden[b, :n] - theirs[b, :n]).abs().max().item() for b, n in enumerate(LENGTHS))
    print(f"max |ours - HF| for {overrides}: {worst:.2e}")
    assert worst <= 1e-4


def test_adapter_matches_hf_per_utterance(tmp_path):
    # HF's adapter convolves the encoder's padded frames too, so in a padded batch the last adapter frame
    # of an odd-length utterance differs from that utterance alone; ours zeroes them and matches HF run on
    # each utterance by itself. The longest row has no padding: it must equal HF's batched output.
    overrides = dict(add_adapter=True, num_adapter_layers=2, output_hidden_size=48)
    overrides |= dict(use_intermediate_ffn_before_adapter=True)
    hf = save_hf(tmp_path, transformers.Wav2Vec2BertModel, **overrides)
    ours = ours_from(tmp_path)
    report = load_hf_weights(ours, tmp_path)
    assert report.skipped == () and report.left_at_init == ("lm_head.weight", "lm_head.bias")
    assert any(name.startswith("wav2vec2_bert.adapter.proj.") for name in report.loaded)

    features, lengths, attention_mask = padded_batch()
    with torch.no_grad():
        batched = hf(features, attention_mask=attention_mask).last_hidden_state
        hidden, out_lengths = ours.encode(features, lengths)
        alone = [hf(features[b : b + 1, :n]).last_hidden_state[0] for b, n in enumerate(LENGTHS)]

    # 37 -> 19 -> 10, 30 -> 15 -> 8, 17 -> 9 -> 5 (kernel 3, stride 2: ceil(T / 2) per layer)
    assert out_lengths.tolist() == [10, 8, 5] == [len(a) for a in alone]
    assert hidden.shape == batched.shape == (3, 10, 48)
    worst = max((hidden[b, :n] - alone[b]).abs().max().item() for b, n in enumerate(out_lengths.tolist()))
    print(f"max |ours - HF alone| with the adapter: {worst:.2e}")
    assert worst <= 1e-4
    torch.testing.assert_close(hidden[0], batched[0], atol=1e-4, rtol=0)


def test_ctc_checkpoint_loads_its_head_and_gives_hfs_log_probs(tmp_path):
    hf = save_hf(tmp_path, transformers.Wav2Vec2BertForCTC, vocab_size=7)
    values = config_from_hf(tmp_path)
    assert values["vocab_size"] == 7
    ours = ours_from(tmp_path)
    report = load_hf_weights(ours, tmp_path)
    assert report.skipped == () and report.left_at_init == ()
    assert sorted(report.loaded) == sorted(ours.state_dict())

    features, lengths, attention_mask = padded_batch()
    with torch.no_grad():
        theirs = hf(features, attention_mask=attention_mask).logits.log_softmax(-1)
        log_probs, _ = ours(features, lengths)

    worst = max((log_probs[b, :n] - theirs[b, :n]).abs().max().item() for b, n in enumerate(LENGTHS))
    print(f"max |ours - HF| CTC log-probs: {worst:.2e}")
    assert worst <= 1e-4


def test_a_different_vocabulary_leaves_the_head_at_initialisation(tmp_path):
    save_hf(tmp_path, transformers.Wav2Vec2BertForCTC, vocab_size=7)
    ours = ours_from(tmp_path, vocab_size=9)
    head_before = ours.lm_head.weight.clone()

    report = load_hf_weights(ours, tmp_path)

    assert dict(report.skipped) == {
        "lm_head.weight": "shape [7, 32] -> [9, 32]",
        "lm_head.bias": "shape [7] -> [9]",
    }
    assert report.left_at_init == ("lm_head.weight", "lm_head.bias")
    assert torch.equal(ours.lm_head.weight, head_before)


def test_unknown_tensors_are_skipped_by_name(tmp_path, capsys):
    save_hf(tmp_path, transformers.Wav2Vec2BertModel, mask_time_prob=0.0)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["projector.weight"] = torch.zeros(3, 32)
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})

    report = load_hf_weights(ours_from(tmp_path), tmp_path)

    assert report.skipped == (("projector.weight", "unknown name"),)
    assert "skipped projector.weight: unknown name" in capsys.readouterr().out


def test_masked_spec_embed_is_skipped_with_the_reason_when_the_config_has_none(tmp_path):
    save_hf(tmp_path, transformers.Wav2Vec2BertModel)  # mask_time_prob 0.05: the checkpoint has one
    report = load_hf_weights(ours_from(tmp_path, mask_time_prob=0.0), tmp_path)

    ((name, reason),) = report.skipped
    assert name == "masked_spec_embed" and "mask_time_prob" in reason


def test_config_json_path_and_sharded_checkpoints_work_like_the_directory(tmp_path):
    torch.manual_seed(0)
    hf = transformers.Wav2Vec2BertModel(hf_config()).eval()
    hf.save_pretrained(tmp_path, max_shard_size="20KB")  # model-0000N-of-0000M.safetensors + index
    assert (tmp_path / "model.safetensors.index.json").is_file()

    assert config_from_hf(tmp_path / "config.json") == config_from_hf(tmp_path)
    ours = ours_from(tmp_path / "config.json")
    report = load_hf_weights(ours, tmp_path / "config.json")

    assert report.skipped == () and report.left_at_init == ("lm_head.weight", "lm_head.bias")
    features, lengths, attention_mask = padded_batch()
    with torch.no_grad():
        theirs = hf(features, attention_mask=attention_mask).last_hidden_state
        hidden, _ = ours.encode(features, lengths)
    torch.testing.assert_close(hidden[0], theirs[0], atol=1e-4, rtol=0)


def test_config_maps_hf_names_onto_ours(tmp_path):
    save_hf(tmp_path, transformers.Wav2Vec2BertModel, hidden_act="gelu", layer_norm_eps=1e-6)
    values = config_from_hf(tmp_path)

    assert (values["d_model"], values["num_layers"], values["num_heads"]) == (32, 2, 4)
    assert (values["input_dim"], values["hidden_act"], values["layer_norm_eps"]) == (20, "gelu", 1e-6)
    assert "vocab_size" not in values  # a bare encoder has none: the caller gives it
    assert values["output_hidden_size"] is None  # HF writes hidden_size there when unset


def test_layerdrop_is_a_training_choice_not_imported_from_the_checkpoint(tmp_path):
    save_hf(tmp_path, transformers.Wav2Vec2BertModel, layerdrop=0.1)  # w2v-bert-2.0's value

    # A layer skipped on one DDP rank and not on another breaks the gradient all-reduce.
    assert "layerdrop" not in config_from_hf(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_act": "quick_gelu"}, r"hidden_act='quick_gelu' \(implemented: relu"),
        ({"adapter_act": "relu6"}, "adapter_act='relu6'"),
        ({"position_embeddings_type": "alibi"}, "position_embeddings_type='alibi'"),
        ({"model_type": "wav2vec2"}, "model_type is 'wav2vec2', expected 'wav2vec2-bert'"),
    ],
)
def test_unsupported_options_are_refused_by_name(tmp_path, change, message):
    save_hf(tmp_path, transformers.Wav2Vec2BertModel)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), **change}))

    with pytest.raises(ValueError, match=message) as error:
        config_from_hf(tmp_path)
    assert str(config_path) in str(error.value)


def test_a_missing_checkpoint_says_what_was_looked_for(tmp_path):
    save_hf(tmp_path, transformers.Wav2Vec2BertModel)
    (tmp_path / "model.safetensors").unlink()

    with pytest.raises(FileNotFoundError, match=re.escape("model.safetensors.index.json")):
        load_hf_weights(ours_from(tmp_path), tmp_path)
