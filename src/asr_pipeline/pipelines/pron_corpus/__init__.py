"""Stage `pron_corpus`: the labelled pronunciation demo set (espeak-ng saying words right and wrong), in SpeechOcean762 layout."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
