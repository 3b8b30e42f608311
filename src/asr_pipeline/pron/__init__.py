"""Pronunciation scoring: phone inventory, G2P, and (to come) the aligner, GOP and scoring head (issue 16)."""
