"""Training data of the pronunciation aligner: feature shards whose CTC targets are phones.

Our feature shards carry the tokenizer's pieces in ``tokens``; the aligner learns the phones of the same
utterances (the ``pron_phones`` stage's ``phone_ids``: blank 0, SIL 1, 39 ARPABET phones). ``with_phone_targets``
swaps the column shard by shard and drops, by id, the rows the G2P had no phones for (the pron_phones report
already counts and names them), so every other column and the row order stay as the features stage wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from asr_pipeline.decoding.metrics import edit_distance


def with_phone_targets(table: pa.Table, phones: Mapping[str, Sequence[int]]) -> tuple[pa.Table, list[str]]:
    """``table`` (a feature shard) with ``tokens`` replaced by each row's phone ids; the ids of rows without
    phones are dropped and returned."""
    ids = table.column("id").to_pylist()
    keep = [utterance in phones for utterance in ids]
    dropped = [utterance for utterance, kept in zip(ids, keep, strict=True) if not kept]
    kept_table = table.filter(pa.array(keep)) if dropped else table
    column = table.schema.get_field_index("tokens")
    targets = [list(phones[utterance]) for utterance in kept_table.column("id").to_pylist()]
    tokens = pa.array(targets, type=table.schema.field("tokens").type)
    return kept_table.set_column(column, table.schema.field("tokens"), tokens), dropped


def phone_error_rate(references: Sequence[Sequence[int]], hypotheses: Sequence[Sequence[int]]) -> float:
    """Phone error rate in percent: edit distance summed over utterances / reference phones."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    errors = sum(edit_distance(ref, hyp) for ref, hyp in zip(references, hypotheses, strict=True))
    total = sum(len(ref) for ref in references)
    return 100.0 * errors / max(total, 1)


__all__ = ["phone_error_rate", "with_phone_targets"]
