"""Stage `finetune@<name>`: adapt a trained run to another corpus (full or LoRA), scored before and after."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
