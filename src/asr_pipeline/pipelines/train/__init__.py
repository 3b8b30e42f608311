"""Stage `train`: resolve the training config and run the torchrun DDP job."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
