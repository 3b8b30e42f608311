"""The built-in demo corpus: generated English sentences spoken by espeak-ng voices."""

from asr_pipeline.demo.corpus import DemoCorpusParams, build_demo_corpus
from asr_pipeline.demo.sentences import VOCABULARY, generate_sentences
from asr_pipeline.demo.synthesis import Voice, split_voices, synthesize, wav_duration_seconds

__all__ = [
    "VOCABULARY",
    "DemoCorpusParams",
    "Voice",
    "build_demo_corpus",
    "generate_sentences",
    "split_voices",
    "synthesize",
    "wav_duration_seconds",
]
