"""hubert.layer_scores: what is written without phone labels, and how the best layer is chosen (the whole
ABX of a pretrained checkpoint's layers: tests/pipelines/test_hubert_pipelines.py)."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.hubert.layer_scores import COLUMNS, mean_error, score_iteration_layers


def test_an_iteration_without_an_item_file_gets_an_empty_table_and_the_reason(tmp_path):
    score_iteration_layers(tmp_path, "mfcc")
    assert (tmp_path / "abx" / "scores.tsv").read_text().split("\n")[0].split("\t") == list(COLUMNS)
    assert "names no espeak-ng voices" in json.loads((tmp_path / "abx_metrics.json").read_text())["reason"]
    assert not (tmp_path / "abx" / "best_layer.json").exists()


@pytest.mark.parametrize(
    "row, expected",
    [
        ({"within": 10.0, "across": 20.0}, 15.0),
        ({"within": None, "across": 12.0}, 12.0),
        ({"within": 8.0, "across": None}, 8.0),
    ],
)
def test_a_layers_error_is_the_mean_of_the_modes_it_has_a_cell_in(row, expected):
    assert mean_error(row) == expected
