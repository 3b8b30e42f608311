"""The two shapes of pretrained speech model this package fine-tunes, and how each is prompted.

- Encoder-decoder (Whisper, ``WhisperForConditionalGeneration``): log-mel features of one 30 s window go to
  the encoder; the decoder reads ``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` and then
  writes the transcript and ``<|endoftext|>``.
- Audio-LLM (Voxtral, ``VoxtralForConditionalGeneration``): the audio is cut into 30 s windows, each encoded
  and projected to ``tokens_per_window`` embeddings that replace as many ``[AUDIO]`` placeholders in the
  prompt. The prompt is mistral_common's transcription request (``_encode_instruct_transcription``, which
  ``VoxtralProcessor.apply_transcription_request`` calls): ``<s>[INST][BEGIN_AUDIO][AUDIO]x N[/INST]``
  ``lang:en[TRANSCRIBE]``; the transcript and ``</s>`` follow. A model folder with Voxtral's own tokenizer
  (``tekken.json``, which transformers loads as ``MistralCommonBackend``) gets its prompt from mistral_common
  itself (``encode_transcription``); only a tokenizer without it (a ``tokenizer.json`` stand-in) has the
  prompt built here from the special tokens by name, in the same order.

Which one a model is comes from its config's capabilities (``is_encoder_decoder``, ``audio_token_id``), not
its name, so a fine-tuned derivative with another ``model_type`` works the same. Both models see one
sequence per utterance, ``prompt + transcript + end``, and are trained on the transcript part only
(``collate``).
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

WHISPER_PROMPT = ("<|startoftranscript|>", "<|{language}|>", "<|{task}|>", "<|notimestamps|>")
VOXTRAL_BEFORE_AUDIO = ("[INST]", "[BEGIN_AUDIO]")
VOXTRAL_AFTER_AUDIO = ("[/INST]",)
VOXTRAL_AUDIO, VOXTRAL_TRANSCRIBE = "[AUDIO]", "[TRANSCRIBE]"


def _token_ids(tokenizer: Any, tokens: list[str], model: str) -> list[int]:
    ids = tokenizer.convert_tokens_to_ids(tokens)
    unknown = [
        token for token, id_ in zip(tokens, ids, strict=True) if id_ is None or id_ == tokenizer.unk_token_id
    ]
    if unknown:
        raise ValueError(
            f"the tokenizer of {model} has no {unknown} token(s), which its prompt needs; is it the "
            "model's own tokenizer, and is hf_finetune language a code it knows (e.g. en)?"
        )
    return list(ids)


@dataclass(frozen=True)
class EncoderDecoder:
    """Whisper: features to the encoder, the prompt and transcript to the decoder."""

    source: str
    lora_targets: str = r".*\.(q_proj|k_proj|v_proj|out_proj)$"
    max_windows: int = 1  # Whisper's encoder takes exactly one 30 s window

    def prompt_ids(self, tokenizer: Any, windows: int, language: str | None, task: str) -> list[int]:
        tokens = [WHISPER_PROMPT[0]]
        if language:
            tokens.append(WHISPER_PROMPT[1].format(language=language))
        tokens += [WHISPER_PROMPT[2].format(task=task), WHISPER_PROMPT[3]]
        return _token_ids(tokenizer, tokens, self.source)

    def model_inputs(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {
            "input_features": batch["input_features"],  # (B, F, T)
            "decoder_input_ids": batch["input_ids"],  # (B, L)
            "decoder_attention_mask": batch["attention_mask"],
        }

    def generate(self, model: Any, batch: dict[str, Any], max_new_tokens: int) -> list[list[int]]:
        """The transcript tokens after the prompt, per utterance (greedy).

        Through transformers' plain ``GenerationMixin.generate``: Whisper's own override adds long-form and
        timestamp handling, strips the prompt and, given ``decoder_input_ids``, wrote past
        ``max_new_tokens`` (transformers 5.24); the plain one continues the prompt exactly as a step-by-step
        greedy loop does, with the generation config's token suppression."""
        from transformers import GenerationMixin

        prompt = batch["input_ids"]  # (B, P): the same prompt for every utterance
        sequences = GenerationMixin.generate(
            model,
            input_features=batch["input_features"],
            decoder_input_ids=prompt,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
        )
        return [row[prompt.shape[1] :].tolist() for row in sequences]


@dataclass(frozen=True)
class AudioLLM:
    """Voxtral: audio embeddings in place of the prompt's ``[AUDIO]`` tokens, then a decoder-only LM."""

    source: str
    audio_token_id: int
    tokens_per_window: int
    lora_targets: str = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)$"
    max_windows: int | None = None  # any number of 30 s windows

    def prompt_ids(self, tokenizer: Any, windows: int, language: str | None, task: str) -> list[int]:
        if task != "transcribe":
            raise ValueError(f"{self.source} transcribes only; hf_finetune task {task!r} needs Whisper")
        audio_tokens = windows * self.tokens_per_window
        mistral = getattr(tokenizer, "tokenizer", None)  # MistralCommonBackend's mistral_common tokenizer
        if hasattr(mistral, "encode_transcription"):
            ids = list(transcription_request_ids(mistral, audio_tokens, language))
            if ids.count(self.audio_token_id) != audio_tokens:
                raise ValueError(
                    f"{self.source}/tekken.json's transcription request for {windows} window(s) has "
                    f"{ids.count(self.audio_token_id)} audio tokens of id {self.audio_token_id}, config.json "
                    f"expects {audio_tokens}: are tekken.json's audio settings (chunk_length_s, frame_rate) and "
                    "audio token from the same model as config.json?"
                )
            return ids
        before = _token_ids(tokenizer, list(VOXTRAL_BEFORE_AUDIO), self.source)
        after = _token_ids(tokenizer, list(VOXTRAL_AFTER_AUDIO), self.source)
        transcribe = _token_ids(tokenizer, [VOXTRAL_TRANSCRIBE], self.source)
        audio = [self.audio_token_id] * audio_tokens
        language_ids = tokenizer.encode(f"lang:{language}", add_special_tokens=False) if language else []
        return [tokenizer.bos_token_id, *before, *audio, *after, *language_ids, *transcribe]

    def model_inputs(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {
            "input_ids": batch["input_ids"],  # (B, L)
            "attention_mask": batch["attention_mask"],
            "input_features": batch["input_features"],  # (windows of all B, F, T), in utterance order
        }

    def generate(self, model: Any, batch: dict[str, Any], max_new_tokens: int) -> list[list[int]]:
        """The transcript tokens after the prompt, per utterance (greedy; prompts are left-padded)."""
        prompt = batch["input_ids"]  # (B, P)
        sequences = model.generate(
            **self.model_inputs(batch), max_new_tokens=max_new_tokens, do_sample=False, num_beams=1
        )
        return [row[prompt.shape[1] :].tolist() for row in sequences]


@functools.lru_cache(maxsize=64)  # one encoding takes ~0.1 s (a silent wav written and read back)
def transcription_request_ids(mistral: Any, audio_tokens: int, language: str | None) -> tuple[int, ...]:
    """mistral_common's own token ids for transcribing audio that takes ``audio_tokens`` [AUDIO] tokens.

    ``mistral`` is a ``MistralTokenizer`` (``MistralCommonBackend.tokenizer``, loaded from ``tekken.json``).
    The prompt depends on the audio's length only, so silence of that length stands in for the audio."""
    from mistral_common.protocol.instruct.chunk import RawAudio
    from mistral_common.protocol.transcription.request import TranscriptionRequest
    from mistral_common.tokens.tokenizers.audio import Audio

    config = mistral.instruct_tokenizer.audio_encoder.audio_config
    silence = np.zeros(audio_tokens * config.raw_audio_length_per_tok, dtype=np.float32)
    audio = RawAudio.from_audio(Audio(audio_array=silence, sampling_rate=config.sampling_rate, format="wav"))
    return tuple(mistral.encode_transcription(TranscriptionRequest(audio=audio, language=language)).tokens)


ModelFamily = EncoderDecoder | AudioLLM


def family_of(config: Any, source: str) -> ModelFamily:
    """The family a transformers config belongs to, by what it has (module docstring)."""
    if getattr(config, "audio_token_id", None) is not None and hasattr(config, "audio_config"):
        audio = config.audio_config
        # Per window: the encoder's max_source_positions frames, regrouped by the projector into vectors of
        # intermediate_size (Voxtral: 1500 x 1280 -> 375 x 5120), one per [AUDIO] token.
        tokens = audio.max_source_positions * audio.hidden_size // audio.intermediate_size
        return AudioLLM(source, int(config.audio_token_id), tokens)
    if getattr(config, "is_encoder_decoder", False) and hasattr(config, "num_mel_bins"):
        return EncoderDecoder(source)
    raise ValueError(
        f"{source} is a {getattr(config, 'model_type', '?')} model: hf_finetune fine-tunes speech "
        "encoder-decoders (Whisper) and audio-LLMs (Voxtral) only"
    )


@dataclass
class Pretrained:
    """A loaded pretrained model with what reads its input and writes its output."""

    model: Any  # a transformers PreTrainedModel
    feature_extractor: Any  # WhisperFeatureExtractor (both families use one)
    tokenizer: Any
    family: ModelFamily


def load_pretrained(source: str, dtype: Any = None) -> Pretrained:
    """The model, feature extractor and tokenizer of ``source`` (a folder or hub id), as a user's
    downloaded model loads: ``from_pretrained`` of the Auto classes."""
    import transformers
    from transformers import AutoConfig, AutoFeatureExtractor, AutoTokenizer

    if Path(source, "tekken.json").is_file() and importlib.util.find_spec("mistral_common") is None:
        raise ValueError(
            f"{source} has Voxtral's Tekken tokenizer (tekken.json), which transformers reads through "
            "mistral_common: install it as `make setup` does (.ci/setup.sh)"
        )
    config = AutoConfig.from_pretrained(source)
    family = family_of(config, source)
    # The class the folder was saved from (config.json "architectures"), as pipeline() picks it.
    names = [name for name in (config.architectures or []) if hasattr(transformers, name)]
    if not names:
        raise ValueError(
            f"{source}/config.json names no transformers model class in 'architectures' "
            f"({config.architectures}); save the model with save_pretrained, or upgrade transformers"
        )
    model = getattr(transformers, names[0]).from_pretrained(source, dtype=dtype)
    return Pretrained(
        model, AutoFeatureExtractor.from_pretrained(source), AutoTokenizer.from_pretrained(source), family
    )


__all__ = [
    "AudioLLM",
    "EncoderDecoder",
    "ModelFamily",
    "Pretrained",
    "family_of",
    "load_pretrained",
    "transcription_request_ids",
]
