"""hf_finetune.models: a transformers config's family is told by what it has (Whisper: an encoder-decoder over
mel bins; Voxtral: an audio token and an audio encoder), and each family's prompt is its tokenizer's ids for
its prompt tokens, refused when the tokenizer lacks one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from asr_pipeline.hf_finetune.models import AudioLLM, EncoderDecoder, family_of


class ToyTokenizer:
    """Ids for a fixed vocabulary; anything else is the unknown token (as transformers' tokenizers answer)."""

    unk_token_id, bos_token_id = 0, 1

    def __init__(self, tokens: list[str]) -> None:
        self.ids = {token: index for index, token in enumerate(tokens, start=2)}

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        return [self.ids.get(token, self.unk_token_id) for token in tokens]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [100 + len(text)]


WHISPER = ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
VOXTRAL = ["[INST]", "[BEGIN_AUDIO]", "[/INST]", "[TRANSCRIBE]"]


def test_an_encoder_decoder_over_mel_bins_is_whisper():
    config = SimpleNamespace(is_encoder_decoder=True, num_mel_bins=80, model_type="whisper")

    assert family_of(config, "tiny-whisper") == EncoderDecoder("tiny-whisper")


def test_an_audio_token_with_an_audio_encoder_is_an_audio_llm_with_its_tokens_per_window():
    # Voxtral's projector regroups 1500 x 1280 encoder frames into vectors of 5120: 375 [AUDIO] tokens.
    audio = SimpleNamespace(max_source_positions=1500, hidden_size=1280, intermediate_size=5120)
    config = SimpleNamespace(audio_token_id=24, audio_config=audio, model_type="voxtral")

    assert family_of(config, "voxtral") == AudioLLM("voxtral", audio_token_id=24, tokens_per_window=375)


def test_another_kind_of_model_is_refused_naming_its_type_and_what_is_supported():
    with pytest.raises(ValueError, match=r"bert is a bert model: hf_finetune fine-tunes .*Whisper.*Voxtral"):
        family_of(SimpleNamespace(model_type="bert"), "bert")


def test_whispers_prompt_names_the_language_and_task_or_leaves_the_language_out():
    tokenizer = ToyTokenizer(WHISPER)
    whisper = EncoderDecoder("tiny-whisper")

    assert whisper.prompt_ids(tokenizer, 1, "en", "transcribe") == [2, 3, 4, 5]
    assert whisper.prompt_ids(tokenizer, 1, None, "transcribe") == [2, 4, 5]


def test_a_prompt_token_the_tokenizer_lacks_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"the tokenizer of tiny-whisper has no \['<\|xx\|>'\] token\(s\)"):
        EncoderDecoder("tiny-whisper").prompt_ids(ToyTokenizer(WHISPER), 1, "xx", "transcribe")


def test_an_audio_llms_prompt_holds_its_audio_tokens_per_window_between_the_instruction_tokens():
    tokenizer = ToyTokenizer(VOXTRAL)
    voxtral = AudioLLM("voxtral", audio_token_id=99, tokens_per_window=3)

    ids = voxtral.prompt_ids(tokenizer, 2, None, "transcribe")

    # bos, [INST], [BEGIN_AUDIO], 2 windows x 3 audio tokens, [/INST], [TRANSCRIBE]
    assert ids == [1, 2, 3, *[99] * 6, 4, 5]
    assert voxtral.prompt_ids(tokenizer, 1, "en", "transcribe")[-2:] == [100 + len("lang:en"), 5]
    with pytest.raises(
        ValueError, match=r"voxtral transcribes only; hf_finetune task 'translate' needs Whisper"
    ):
        voxtral.prompt_ids(tokenizer, 1, None, "translate")
