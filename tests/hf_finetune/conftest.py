"""Tiny pretrained models and a few demo utterances for the hf_finetune tests.

The models are the real transformers classes (Whisper, Voxtral) at a few thousand random weights, with a
byte-level BPE tokenizer trained here on the utterances' text and a 16-bin log-mel extractor with 4 s
windows; each is ``save_pretrained`` into a folder and loaded back from it, as a downloaded model is.
``tiny_voxtral_tekken`` is laid out as a downloaded Voxtral is: Voxtral's real 30 s windows and 375 audio
tokens each, and in place of ``tokenizer.json`` a real Tekken tokenizer file (``tekken.json``, mistral_common's
format: a byte-level vocabulary of 256 and a few merges, its special tokens, the audio settings). The
audio is the demo corpus's espeak-ng speech (``demo.synthesis``) at a fixed rate, so every utterance fits
one window.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest
import torch

from asr_pipeline.demo.corpus import open_sentences
from asr_pipeline.demo.synthesis import Voice, split_voices, synthesize

MEL_BINS, WINDOW_SEC = 16, 4  # a 4 s window: 400 frames, 200 encoder positions
WHISPER_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|fr|>", "<|transcribe|>",
                    "<|translate|>", "<|notimestamps|>"]  # fmt: skip
VOXTRAL_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "[INST]", "[/INST]", "[BEGIN_AUDIO]", "[AUDIO]",
                    "[TRANSCRIBE]"]  # fmt: skip


def short_sentences(count: int) -> list[str]:
    return sorted(open_sentences(), key=len)[:count]


def write_demo_utterances(root: Path, texts: list[str], split: str, seed: int) -> Path:
    """``texts`` spoken by the demo's training voices, as wav files and a JSONL manifest."""
    rng = random.Random(seed)
    pairs = split_voices(0)["train"]
    lines = []
    for i, text in enumerate(texts):
        name, variant = rng.choice(pairs)
        path = root / f"{split}-{i:03d}.wav"
        path.write_bytes(synthesize(text, Voice(name, variant, rate_wpm=220, pitch=rng.randint(30, 70))))
        lines.append(json.dumps({"id": f"{split}-{i:03d}", "audio_path": path.name, "text": text}))
    manifest = root / f"{split}.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def bpe_tokenizer(texts: list[str], specials: list[str], **special_names):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tokenizer.train_from_iterator([*texts, "lang:en"], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, additional_special_tokens=specials, **special_names
    )


def feature_extractor(window_sec: int = WINDOW_SEC):
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(feature_size=MEL_BINS, chunk_length=window_sec)


# Specials by rank (mistral_common reads a special token's id as its index): its classic 20, [AUDIO] and
# [BEGIN_AUDIO] at 24 and 25, [TRANSCRIBE] at 34, and fillers between, named as mistral_common names them.
TEKKEN_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                   "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]",
                   "[IMG_END]", "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                   "[TOOL_CONTENT]", *(f"<SPECIAL_{i}>" for i in range(20, 24)), "[AUDIO]", "[BEGIN_AUDIO]",
                   *(f"<SPECIAL_{i}>" for i in range(26, 32)), "[ARGS]", "[CALL_ID]", "[TRANSCRIBE]"]  # fmt: skip
TEKKEN_MERGES = [b"th", b"he", b"the", b" t", b"in", b"an", b"er", b"la", b"lan", b"ng", b"lang"]
TEKKEN_NUM_SPECIAL = 40  # Voxtral reserves 1000; ids below this are special, the byte vocabulary follows


def write_tekken(folder: Path, window_sec: int) -> int:
    """A Tekken tokenizer file with Voxtral's audio settings (16 kHz, 12.5 audio tokens a second, 10 ms
    hop, audio padded to whole ``window_sec`` chunks); returns its vocabulary size."""
    pieces = [bytes([byte]) for byte in range(256)] + TEKKEN_MERGES
    vocab = [{"rank": rank, "token_bytes": base64.b64encode(piece).decode(),
              "token_str": piece.decode("utf-8", errors="replace")} for rank, piece in enumerate(pieces)]  # fmt: skip
    tekken = {
        "config": {"pattern": r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+",
                   "num_vocab_tokens": len(vocab), "default_vocab_size": TEKKEN_NUM_SPECIAL + len(vocab),
                   "default_num_special_tokens": TEKKEN_NUM_SPECIAL, "version": "v7"},
        "vocab": vocab,
        "special_tokens": [{"rank": rank, "token_str": token, "is_control": True}
                           for rank, token in enumerate(TEKKEN_SPECIALS)],
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": float(window_sec),
                  "audio_encoding_config": {"num_mel_bins": MEL_BINS, "hop_length": 160, "window_size": 400}},
    }  # fmt: skip
    (folder / "tekken.json").write_text(json.dumps(tekken))
    return TEKKEN_NUM_SPECIAL + len(vocab)


def save_tiny_whisper(folder: Path, texts: list[str], d_model: int = 32) -> Path:
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    tokenizer = bpe_tokenizer(texts, WHISPER_SPECIALS, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                              bos_token="<|startoftranscript|>")  # fmt: skip
    ids = dict(zip(WHISPER_SPECIALS, tokenizer.convert_tokens_to_ids(WHISPER_SPECIALS), strict=True))
    config = WhisperConfig(
        vocab_size=len(tokenizer), num_mel_bins=MEL_BINS, d_model=d_model, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model, max_source_positions=WINDOW_SEC * 50, max_target_positions=64,
        pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|startoftranscript|>"],
        eos_token_id=ids["<|endoftext|>"], decoder_start_token_id=ids["<|startoftranscript|>"],
    )  # fmt: skip
    with torch.random.fork_rng():  # the same random weights whichever tests ran before in this process
        torch.manual_seed(0)
        model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids["<|endoftext|>"],
        pad_token_id=ids["<|endoftext|>"], no_timestamps_token_id=ids["<|notimestamps|>"],
        lang_to_id={"<|en|>": ids["<|en|>"], "<|fr|>": ids["<|fr|>"]}, is_multilingual=True,
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        max_length=64,
    )  # fmt: skip
    for part in (model, tokenizer, feature_extractor()):
        part.save_pretrained(folder)
    return folder


def save_tiny_voxtral(
    folder: Path, texts: list[str], hidden: int = 16, window_sec: int = WINDOW_SEC, tekken: bool = False
) -> Path:
    """A tiny Voxtral with a BPE ``tokenizer.json`` trained on ``texts``, or with ``tekken`` a ``tekken.json``."""
    from transformers import VoxtralConfig, VoxtralForConditionalGeneration

    if tekken:
        folder.mkdir(parents=True, exist_ok=True)
        tokenizer, vocab_size = None, write_tekken(folder, window_sec)
        ids = {token: TEKKEN_SPECIALS.index(token) for token in ("<s>", "</s>", "<pad>", "[AUDIO]")}
    else:
        tokenizer = bpe_tokenizer(texts, VOXTRAL_SPECIALS, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                  unk_token="<unk>")  # fmt: skip
        vocab_size = len(tokenizer)
        ids = dict(zip(VOXTRAL_SPECIALS, tokenizer.convert_tokens_to_ids(VOXTRAL_SPECIALS), strict=True))
    config = VoxtralConfig(
        audio_config={"model_type": "voxtral_encoder", "vocab_size": vocab_size, "hidden_size": hidden,
                      "intermediate_size": 4 * hidden, "num_hidden_layers": 1, "num_attention_heads": 2,
                      "num_mel_bins": MEL_BINS, "max_source_positions": window_sec * 50},
        text_config={"model_type": "llama", "vocab_size": vocab_size, "hidden_size": hidden,
                     "intermediate_size": 2 * hidden, "num_hidden_layers": 1, "num_attention_heads": 2,
                     "num_key_value_heads": 1, "head_dim": hidden // 2, "max_position_embeddings": 2048 if tekken else 256,
                     "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"]},
        audio_token_id=ids["[AUDIO]"],
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = VoxtralForConditionalGeneration(config)
    model.generation_config.eos_token_id = ids["</s>"]
    model.generation_config.pad_token_id = ids["<pad>"]
    for part in (model, tokenizer, feature_extractor(window_sec)):
        if part is not None:
            part.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def demo_speech(tmp_path_factory) -> dict[str, Path]:
    """10 training and 4 validation utterances (different sentences, the same voices' pool)."""
    root = tmp_path_factory.mktemp("demo_speech")
    texts = short_sentences(14)
    return {"train": write_demo_utterances(root, texts[:10], "train", seed=1),
            "val": write_demo_utterances(root, texts[10:], "val", seed=2), "texts": texts}  # fmt: skip


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory) -> Path:
    return save_tiny_whisper(tmp_path_factory.mktemp("tiny_whisper"), short_sentences(14))


@pytest.fixture(scope="session")
def tiny_voxtral(tmp_path_factory) -> Path:
    return save_tiny_voxtral(tmp_path_factory.mktemp("tiny_voxtral"), short_sentences(14))


@pytest.fixture(scope="session")
def tiny_voxtral_tekken(tmp_path_factory) -> Path:
    """Voxtral's own layout: ``tekken.json`` and 30 s windows of 1500 encoder positions, 375 [AUDIO] each."""
    return save_tiny_voxtral(tmp_path_factory.mktemp("tiny_voxtral_tekken"), [], window_sec=30, tekken=True)


@pytest.fixture(params=["whisper", "voxtral"])
def tiny_model(request) -> Path:
    return request.getfixturevalue(f"tiny_{request.param}")
