"""Stage `pron_phones`: every transcript as stress-free phones through our G2P (pronunciation scoring)."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
