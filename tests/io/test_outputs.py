"""A stage output folder is emptied in place: files and subfolders go, the folder stays."""

from __future__ import annotations

from asr_pipeline.io.outputs import empty_directory


def test_empty_directory_removes_files_and_subfolders_but_keeps_the_folder(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"x")
    (tmp_path / "old" / "deeper").mkdir(parents=True)
    (tmp_path / "old" / "deeper" / "events.jsonl").write_text("{}\n")

    empty_directory(tmp_path)

    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []
