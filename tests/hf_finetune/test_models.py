"""hf_finetune.models: a transformers config's family is told by what it has (Whisper: an encoder-decoder over
mel bins; Voxtral: an audio token and an audio encoder), and each family's prompt is its tokenizer's ids for
its prompt tokens, refused when the tokenizer lacks one. A Voxtral folder with Voxtral's own tokenizer
(tekken.json) prompts exactly as mistral_common's transcription request does, token by token."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from asr_pipeline.hf_finetune.models import AudioLLM, EncoderDecoder, family_of, load_pretrained


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


def transcription_request(folder, seconds: float, language: str | None) -> list[int]:
    """mistral_common's own ids for transcribing ``seconds`` of audio, from the folder's tekken.json."""
    from mistral_common.protocol.instruct.chunk import RawAudio
    from mistral_common.protocol.transcription.request import TranscriptionRequest
    from mistral_common.tokens.tokenizers.audio import Audio
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    tokenizer = MistralTokenizer.from_file(str(folder / "tekken.json"))
    audio = Audio(audio_array=np.zeros(int(seconds * 16000), np.float32), sampling_rate=16000, format="wav")
    request = TranscriptionRequest(audio=RawAudio.from_audio(audio), language=language)
    return tokenizer.encode_transcription(request).tokens


@pytest.mark.parametrize("windows", [1, 3])
@pytest.mark.parametrize("language", ["en", None])
def test_a_voxtral_folder_with_tekken_json_prompts_exactly_as_mistral_commons_transcription_request(
    tiny_voxtral_tekken, windows, language
):
    loaded = load_pretrained(str(tiny_voxtral_tekken))
    # The audio ends 1 s into its last 30 s window: mistral_common pads it to whole windows, as we featurize.
    expected = transcription_request(tiny_voxtral_tekken, 30 * windows - 1, language)

    assert type(loaded.tokenizer).__name__ == "MistralCommonBackend"  # transformers' reader of tekken.json
    assert loaded.family == AudioLLM(str(tiny_voxtral_tekken), audio_token_id=24, tokens_per_window=375)
    assert loaded.family.prompt_ids(loaded.tokenizer, windows, language, "transcribe") == expected
    # <s> [INST] [BEGIN_AUDIO] 375 [AUDIO] per window [/INST] (lang:en) [TRANSCRIBE]
    lang = loaded.tokenizer.encode("lang:en", add_special_tokens=False) if language else []
    assert expected == [1, 3, 25, *[24] * (375 * windows), 4, *lang, 34]


def test_the_stand_in_prompt_by_token_names_equals_the_real_one_given_the_real_ids(tiny_voxtral_tekken):
    # Where a folder has no tekken.json the prompt is built from the special tokens' names: with Tekken's own
    # ids (and no mistral_common behind them) it gives what mistral_common gives.
    tokenizer = load_pretrained(str(tiny_voxtral_tekken)).tokenizer
    by_name = SimpleNamespace(convert_tokens_to_ids=tokenizer.convert_tokens_to_ids, encode=tokenizer.encode,
                              bos_token_id=tokenizer.bos_token_id, unk_token_id=tokenizer.unk_token_id)  # fmt: skip
    voxtral = AudioLLM("voxtral", audio_token_id=24, tokens_per_window=375)

    for windows, language in [(1, "en"), (2, None)]:
        expected = transcription_request(tiny_voxtral_tekken, 30 * windows, language)
        assert voxtral.prompt_ids(by_name, windows, language, "transcribe") == expected


def test_a_tekken_json_whose_audio_windows_disagree_with_the_models_is_refused(tiny_voxtral_tekken):
    tokenizer = load_pretrained(str(tiny_voxtral_tekken)).tokenizer
    four_second_windows = AudioLLM("voxtral", audio_token_id=24, tokens_per_window=50)

    with pytest.raises(
        ValueError, match=r"voxtral/tekken.json's transcription request for 1 window\(s\) has 375"
    ):
        four_second_windows.prompt_ids(tokenizer, 1, "en", "transcribe")


def test_a_tekken_json_without_mistral_common_installed_is_refused_saying_what_to_install(
    tiny_voxtral_tekken, monkeypatch
):
    monkeypatch.setitem(sys.modules, "mistral_common", None)  # as if not installed

    with pytest.raises(ValueError, match=r"tekken.json\), which transformers reads through mistral_common"):
        load_pretrained(str(tiny_voxtral_tekken))
