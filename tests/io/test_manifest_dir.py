import json

import pytest

from asr_pipeline.io.manifest_dir import SPLIT_FOLDER, VAL_NAMES, resolve_manifest_dir
from asr_pipeline.io.manifests import iter_manifest
from asr_pipeline.io.report import SkipReport


def write_train(folder, count, **extra):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"id": f"utt-{i:04d}", "audio_path": f"audio/{i}.wav", "text": "hi", **extra})
        for i in range(count)
    ]
    (folder / "train.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "train.jsonl"


@pytest.mark.parametrize("val_name", VAL_NAMES)
def test_a_validation_manifest_beside_train_is_used_as_it_is(tmp_path, val_name):
    train = write_train(tmp_path / "data", 3)
    (tmp_path / "data" / val_name).write_text("{}\n")
    split = resolve_manifest_dir(tmp_path / "data", tmp_path / "out")
    assert (split.train, split.val, split.generated) == (train, tmp_path / "data" / val_name, False)
    assert not (tmp_path / "out").exists()


def test_val_is_preferred_over_validation_and_dev(tmp_path):
    write_train(tmp_path, 2)
    for name in ("dev.jsonl", "validation.jsonl", "val.jsonl"):
        (tmp_path / name).write_text("{}\n")
    assert resolve_manifest_dir(tmp_path, tmp_path / "out").val == tmp_path / "val.jsonl"


def test_missing_train_manifest_names_the_folder_and_what_is_there(tmp_path):
    (tmp_path / "training.jsonl").write_text("{}\n")
    with pytest.raises(FileNotFoundError, match=r"no train\.jsonl \(found \['training\.jsonl'\]\)"):
        resolve_manifest_dir(tmp_path, tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_manifest_dir(tmp_path / "absent", tmp_path / "out")


def test_without_validation_about_ten_percent_is_split_off_by_id_hash(tmp_path):
    write_train(tmp_path / "data", 1000)
    split = resolve_manifest_dir(tmp_path / "data", tmp_path / "out")
    assert split.generated and split.train.parent == split.val.parent == tmp_path / "out" / SPLIT_FOLDER
    train_ids = [r.id for r in iter_manifest(split.train, SkipReport())]
    val_ids = [r.id for r in iter_manifest(split.val, SkipReport())]
    assert 70 <= len(val_ids) <= 130  # ~10% of 1000 (binomial sd ~9.5)
    assert sorted(train_ids + val_ids) == [f"utt-{i:04d}" for i in range(1000)]  # nothing lost or doubled
    assert train_ids == sorted(train_ids)  # each half keeps the source order


def test_the_split_does_not_depend_on_record_order(tmp_path):
    train = write_train(tmp_path / "a", 200)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.jsonl").write_text("".join(reversed(train.read_text().splitlines(True))))
    val_a = {
        r.id for r in iter_manifest(resolve_manifest_dir(tmp_path / "a", tmp_path / "oa").val, SkipReport())
    }
    val_b = {
        r.id for r in iter_manifest(resolve_manifest_dir(tmp_path / "b", tmp_path / "ob").val, SkipReport())
    }
    assert val_a == val_b


def test_relative_paths_still_resolve_to_the_same_files(tmp_path):
    write_train(tmp_path / "data", 50, features_path="feats/x.npy")
    split = resolve_manifest_dir(tmp_path / "data", tmp_path / "elsewhere" / "run")
    for manifest in (split.train, split.val):
        for record in iter_manifest(manifest, SkipReport()):
            number = record.id.removeprefix("utt-").lstrip("0") or "0"
            assert (tmp_path / "elsewhere" / "run" / SPLIT_FOLDER / record.audio_path).resolve() == (
                tmp_path / "data" / "audio" / f"{number}.wav"
            )
            assert (tmp_path / "elsewhere" / "run" / SPLIT_FOLDER / record.features_path).resolve() == (
                tmp_path / "data" / "feats" / "x.npy"
            )


def test_a_rerun_reuses_the_same_bytes_and_a_changed_source_is_split_again(tmp_path):
    train = write_train(tmp_path / "data", 100)
    first = resolve_manifest_dir(tmp_path / "data", tmp_path / "out")
    before = (first.train.read_bytes(), first.val.read_bytes(), first.train.stat().st_mtime_ns)
    second = resolve_manifest_dir(tmp_path / "data", tmp_path / "out")
    assert (second.train.read_bytes(), second.val.read_bytes(), second.train.stat().st_mtime_ns) == before

    train.write_text(train.read_text() + json.dumps({"id": "new", "audio_path": "n.wav", "text": "x"}) + "\n")
    third = resolve_manifest_dir(tmp_path / "data", tmp_path / "out")
    ids = [r.id for m in (third.train, third.val) for r in iter_manifest(m, SkipReport())]
    assert "new" in ids and len(ids) == 101


def test_records_without_ids_keep_the_readers_id_and_tiny_manifests_still_get_validation(tmp_path):
    (tmp_path / "train.jsonl").write_text(
        '{"text": "a", "features": [[1.0]]}\n{"text": "b", "features": [[2.0]]}\nnot json\n'
    )
    split = resolve_manifest_dir(tmp_path, tmp_path / "out")
    [val] = list(iter_manifest(split.val, SkipReport()))  # the hash picks none of 2: the lowest hash is taken
    report = SkipReport()
    train = list(iter_manifest(split.train, report))
    assert sorted([val.id, *(r.id for r in train)]) == ["train-000001", "train-000002"]
    assert report.to_dict()["skipped_by_reason"] == {"malformed JSON": 1}  # carried over, still reported
