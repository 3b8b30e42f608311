"""pron.aligner_data: a feature shard's pieces swapped for each row's phone ids (rows without phones dropped by
id, everything else as written), and the phone error rate over a set."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.io.shards import records_to_table
from asr_pipeline.pron.aligner_data import phone_error_rate, with_phone_targets


def shard(*ids: str):
    return records_to_table(
        {"id": i, "features": np.full((3, 2), n, np.float32), "tokens": [9, 9], "duration_ms": 30, "text": i}
        for n, i in enumerate(ids)
    )


def test_tokens_become_the_phone_ids_and_the_other_columns_stay():
    table = shard("a", "b")

    swapped, dropped = with_phone_targets(table, {"a": [3, 4, 5], "b": [1]})

    assert dropped == []
    assert swapped.column("tokens").to_pylist() == [[3, 4, 5], [1]]
    assert swapped.schema == table.schema
    assert swapped.drop_columns(["tokens"]).equals(table.drop_columns(["tokens"]))


def test_rows_without_phones_are_dropped_and_named_in_order():
    swapped, dropped = with_phone_targets(shard("a", "b", "c", "d"), {"b": [7], "d": [8, 9]})

    assert dropped == ["a", "c"]
    assert swapped.column("id").to_pylist() == ["b", "d"]
    assert swapped.column("tokens").to_pylist() == [[7], [8, 9]]
    assert swapped.column("text").to_pylist() == ["b", "d"]


def test_phone_error_rate_sums_edits_over_all_reference_phones():
    # one substitution in 3 phones + one deletion in 2 phones: 2 errors / 5 phones
    assert phone_error_rate([[1, 2, 3], [4, 5]], [[1, 9, 3], [4]]) == pytest.approx(40.0)
    assert phone_error_rate([[]], [[]]) == 0.0
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        phone_error_rate([[1], [2]], [[1]])
