"""features.precomputed: features given in a manifest (inline, .npy, or text) become a checked (T, F) float32
array, or a FeatureError whose reason is the skip report's key and whose detail names what to fix."""

from __future__ import annotations

import numpy as np
import pytest

from asr_pipeline.features.precomputed import (
    FeatureError,
    check_features,
    load_precomputed,
    read_feature_file,
)


def refused(reason: str, detail: str):
    return pytest.raises(FeatureError, match=f"^{reason}: .*{detail}")


def test_a_npy_file_and_a_text_file_of_one_frame_a_line_read_as_the_same_array(tmp_path):
    frames = np.arange(6, dtype=np.float64).reshape(3, 2)
    np.save(tmp_path / "a.npy", frames)
    (tmp_path / "a.txt").write_text("\ufeff0 1\n2 3\n\n4 5\n")  # a BOM and blank lines are not data

    assert np.array_equal(read_feature_file(tmp_path / "a.npy"), frames)
    assert np.array_equal(read_feature_file(tmp_path / "a.txt"), frames)


def test_with_rows_and_cols_given_a_text_files_line_breaks_mean_nothing(tmp_path):
    (tmp_path / "wrapped.txt").write_text("0 1 2\n3 4 5 6 7\n")

    features = read_feature_file(tmp_path / "wrapped.txt", rows=4, cols=2)

    assert features.tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_unusable_files_are_refused_with_the_reason_and_the_place(tmp_path):
    (tmp_path / "ragged.txt").write_text("1 2\n3\n")
    (tmp_path / "words.txt").write_text("1 2\n3 four\n")
    (tmp_path / "empty.txt").write_text("\n \n")
    (tmp_path / "latin1.txt").write_bytes(b"1 \xe9\n")
    (tmp_path / "broken.npy").write_bytes(b"\x93NUMPY garbage")
    np.save(tmp_path / "strings.npy", np.array([["a", "b"]]))

    with refused("missing file", "feature file .*nowhere.npy not found"):
        read_feature_file(tmp_path / "nowhere.npy")
    with refused("rows\\*cols does not match", "give rows and cols for flat data"):
        read_feature_file(tmp_path / "ragged.txt")
    with refused("non-numeric features", "words.txt:2: 'four' is not a number"):
        read_feature_file(tmp_path / "words.txt")
    with refused("unreadable feature file", "holds no numbers"):
        read_feature_file(tmp_path / "empty.txt")
    with refused("unreadable feature file", "not UTF-8 text"):
        read_feature_file(tmp_path / "latin1.txt")
    with refused("unreadable feature file", "re-save it with numpy.save"):
        read_feature_file(tmp_path / "broken.npy")
    with refused("non-numeric features", "holds <U1 values"):
        read_feature_file(tmp_path / "strings.npy")


def test_inline_features_are_shaped_by_rows_and_cols_and_checked_against_the_input_width():
    row = {"kind": "features_inline", "features": [0.5] * 6, "rows": 3, "cols": 2}

    features = load_precomputed(row, input_dim=2)

    assert features.shape == (3, 2) and features.dtype == np.float32
    with refused("rows\\*cols does not match", "rows=2 \\* cols=2 = 4, but the inline features has 6 values"):
        load_precomputed({**row, "rows": 2}, input_dim=2)
    with refused("feature width differs from input_dim", "2 values per frame, but the model input is 80"):
        load_precomputed(row, input_dim=80)
    with refused("missing features", "no inline features attached"):
        load_precomputed({"kind": "features_inline", "features": None}, input_dim=2)


def test_a_feature_file_row_reads_its_file(tmp_path):
    np.save(tmp_path / "f.npy", np.ones((4, 3), np.float16))

    features = load_precomputed({"kind": "features_file", "features_path": str(tmp_path / "f.npy")}, 3)

    assert features.shape == (4, 3) and features.dtype == np.float32


def test_empty_or_non_finite_features_are_refused_naming_the_frame():
    with refused("rows\\*cols does not match", "the features are empty"):
        check_features(np.zeros((0, 2)), 2)
    bad = np.zeros((5, 2))
    bad[3, 1] = np.inf
    with refused("NaN/Inf features", "frame 3 holds NaN or Inf"):
        check_features(bad, 2)
    with refused("non-numeric features", "values of type object"):
        check_features(np.array([[None]], dtype=object), 1)
