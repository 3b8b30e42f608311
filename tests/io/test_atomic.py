"""io.atomic: a write lands whole or not at all, through a ``.tmp`` sibling, and JSON is byte-stable."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.io import atomic
from asr_pipeline.io.atomic import write_bytes_atomic, write_json_atomic


def test_bytes_replace_the_target_and_leave_no_tmp_behind(tmp_path):
    target = tmp_path / "new" / "folder" / "file.bin"
    write_bytes_atomic(target, b"first")
    write_bytes_atomic(target, b"second")

    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.bin"]


def test_a_writer_killed_before_the_rename_leaves_the_old_file_whole(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    write_json_atomic(target, {"step": 1})

    def killed(src, dst):
        raise KeyboardInterrupt  # the process dies between writing the .tmp and renaming it

    monkeypatch.setattr(atomic.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(target, {"step": 2})

    assert json.loads(target.read_text()) == {"step": 1}
    assert (tmp_path / "state.json.tmp").exists()


def test_the_same_payload_gives_the_same_bytes_whatever_the_key_order(tmp_path):
    write_json_atomic(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    write_json_atomic(tmp_path / "b.json", {"a": [1, 2], "b": 1})

    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert (tmp_path / "a.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
