"""The collator's sequences and label mask, token by token, for both model families; for Voxtral also against
transformers' VoxtralProcessor on a folder with Voxtral's own tokenizer (tekken.json)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asr_pipeline.hf_finetune.collate import IGNORE_INDEX, SpeechCollator
from asr_pipeline.hf_finetune.features import window_features
from asr_pipeline.hf_finetune.models import load_pretrained

FRAMES = 400  # the tiny extractor's 4 s window


def example(text: str, windows: int = 1) -> dict:
    return {"id": text, "text": text, "features": np.zeros((windows * FRAMES, 16), dtype=np.float32)}


def test_whisper_labels_are_the_transcript_and_end_only(tiny_whisper):
    loaded = load_pretrained(str(tiny_whisper))
    tokenizer = loaded.tokenizer
    collator = SpeechCollator(tokenizer, loaded.family, FRAMES, language="en", task="transcribe")
    batch = collator([example("we fed the ducks at the pond"), example("i prefer tea")])
    prompt = tokenizer.convert_tokens_to_ids(
        ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
    )
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    long_target = [*tokenizer.encode("we fed the ducks at the pond", add_special_tokens=False), eos]
    short_target = [*tokenizer.encode("i prefer tea", add_special_tokens=False), eos]
    pad = len(long_target) - len(short_target)
    assert batch["input_ids"].tolist() == [prompt + long_target, prompt + short_target + [eos] * pad]
    assert batch["labels"].tolist() == [
        [IGNORE_INDEX] * 4 + long_target,
        [IGNORE_INDEX] * 4 + short_target + [IGNORE_INDEX] * pad,
    ]
    assert batch["attention_mask"].tolist() == [
        [1] * (4 + len(long_target)),
        [1] * (4 + len(short_target)) + [0] * pad,
    ]
    assert batch["input_features"].shape == (2, 16, FRAMES)  # (B, F, T)


def test_whisper_prompt_names_the_language_and_task(tiny_whisper):
    loaded = load_pretrained(str(tiny_whisper))
    tokenizer = loaded.tokenizer
    ids = loaded.family.prompt_ids(tokenizer, 1, "fr", "translate")
    assert tokenizer.convert_ids_to_tokens(ids) == [
        "<|startoftranscript|>",
        "<|fr|>",
        "<|translate|>",
        "<|notimestamps|>",
    ]
    with pytest.raises(ValueError, match=r"no .*<\|de\|>"):
        loaded.family.prompt_ids(tokenizer, 1, "de", "transcribe")


def test_voxtral_prompt_is_the_transcription_request_with_one_audio_token_per_embedding(tiny_voxtral):
    loaded = load_pretrained(str(tiny_voxtral))
    tokenizer, family = loaded.tokenizer, loaded.family
    assert family.tokens_per_window == 200 * 16 // 64  # encoder positions x width / projector input = 50
    collator = SpeechCollator(tokenizer, family, FRAMES, language="en")
    batch = collator([example("i prefer tea", windows=2), example("we fed the ducks")])
    audio = tokenizer.convert_tokens_to_ids("[AUDIO]")
    head = tokenizer.convert_tokens_to_ids(["<s>", "[INST]", "[BEGIN_AUDIO]"])
    tail = [tokenizer.convert_tokens_to_ids("[/INST]"), *tokenizer.encode("lang:en", add_special_tokens=False),
            tokenizer.convert_tokens_to_ids("[TRANSCRIBE]")]  # fmt: skip
    target = [*tokenizer.encode("i prefer tea", add_special_tokens=False), tokenizer.eos_token_id]
    first = head + [audio] * 100 + tail
    assert batch["input_ids"][0].tolist() == first + target
    assert batch["labels"][0].tolist() == [IGNORE_INDEX] * len(first) + target
    assert batch["input_features"].shape == (3, 16, FRAMES)  # 2 + 1 windows, in utterance order
    # The model accepts it: as many [AUDIO] placeholders as the encoder gives embeddings.
    logits = loaded.model(**family.model_inputs(batch)).logits
    assert logits.shape[:2] == batch["input_ids"].shape


def test_generation_batches_pad_prompts_on_the_left(tiny_voxtral):
    loaded = load_pretrained(str(tiny_voxtral))
    collator = SpeechCollator(loaded.tokenizer, loaded.family, FRAMES, for_generation=True)
    batch = collator([example("a", windows=2), example("b")])
    short = batch["attention_mask"][1]
    assert short[:50].sum() == 0 and short[50:].all()  # one window fewer: 50 [AUDIO] tokens of padding
    assert (batch["labels"] == IGNORE_INDEX).all()
    assert torch.equal(
        batch["input_ids"][0, -3:], batch["input_ids"][1, -3:]
    )  # both end with the instruction


def test_voxtral_batches_hold_what_voxtral_processor_gives_for_a_transcription_request(tiny_voxtral_tekken):
    """Our features and prompt against transformers' own path for a downloaded Voxtral folder
    (``VoxtralProcessor.apply_transcription_request``: mistral_common's TranscriptionRequest, tekken.json,
    the Whisper log-mel), for 3 s (one 30 s window) and 61 s (three) of audio; the labels mask that prompt."""
    from transformers import VoxtralProcessor

    loaded = load_pretrained(str(tiny_voxtral_tekken))
    tokenizer = loaded.tokenizer
    rng = np.random.default_rng(0)
    # On the 16-bit grid: the processor hands the audio to mistral_common as a 16-bit wav.
    waves = [(rng.integers(-3000, 3000, seconds * 16000) / 32768).astype(np.float32) for seconds in (3, 61)]
    texts = ["the cat", "then the language"]
    processor = VoxtralProcessor.from_pretrained(str(tiny_voxtral_tekken))
    reference = processor.apply_transcription_request(
        audio=waves, format="wav", sampling_rate=16000, language="en", model_id=str(tiny_voxtral_tekken),
        return_tensors="pt",
    )  # fmt: skip
    collator = SpeechCollator(tokenizer, loaded.family, loaded.feature_extractor.nb_max_frames, language="en")
    batch = collator(
        [
            {"id": text, "text": text, "features": window_features(loaded.feature_extractor, wave)}
            for wave, text in zip(waves, texts, strict=True)
        ]
    )

    assert (
        batch["input_features"].shape == reference["input_features"].shape == (4, 16, 3000)
    )  # 1 + 3 windows
    torch.testing.assert_close(batch["input_features"], reference["input_features"], atol=1e-5, rtol=0)
    for b, text in enumerate(texts):
        prompt = reference["input_ids"][b][reference["attention_mask"][b] == 1].tolist()  # left-padded
        target = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
        assert len(prompt) == 9 + 375 * (1, 3)[b]  # <s>[INST][BEGIN_AUDIO] [/INST] lang:en (4) [TRANSCRIBE]
        assert batch["input_ids"][b, : len(prompt) + len(target)].tolist() == prompt + target
        padding = batch["input_ids"].shape[1] - len(prompt) - len(target)
        assert batch["labels"][b].tolist() == [IGNORE_INDEX] * len(prompt) + target + [IGNORE_INDEX] * padding
        assert batch["attention_mask"][b].tolist() == [1] * (len(prompt) + len(target)) + [0] * padding
    logits = loaded.model(**loaded.family.model_inputs(batch)).logits  # the model takes it
    assert logits.shape[:2] == batch["input_ids"].shape
