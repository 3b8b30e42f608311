"""Stage `hf_finetune@<name>`: fine-tune a pretrained Whisper or Voxtral model, scored before and after."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
