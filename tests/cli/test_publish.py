"""``asr-pipeline publish``: the flags reach ``publish.hub.publish_folder`` as a HubTarget and the commit is
printed; a repo id without its namespace or a missing folder exits 2 before any request (the upload itself:
tests/publish/test_hub.py)."""

from __future__ import annotations

import json

import pytest

from asr_pipeline.cli import main
from asr_pipeline.publish import hub


@pytest.fixture
def published(monkeypatch) -> list[tuple]:
    """What publish_folder was called with, instead of the Hub."""
    calls = []

    def record(folder, target, message):
        calls.append((folder, target, message))
        return "abc123"

    monkeypatch.setattr(hub, "publish_folder", record)
    return calls


def test_the_folder_goes_to_the_repo_and_branch_and_the_commit_is_printed(tmp_path, published, capsys):
    status = main(
        ["publish", "--export-dir", str(tmp_path), "--repo-id", "me/tiny", "--revision", "v1", "--private"]
    )
    assert status == 0
    [(folder, target, message)] = published
    assert folder == tmp_path and message is None
    assert (target.repo_id, target.revision, target.private) == ("me/tiny", "v1", True)
    assert json.loads(capsys.readouterr().out) == {"repo_id": "me/tiny", "revision": "v1", "commit": "abc123"}


@pytest.mark.parametrize(
    ("export_dir", "repo_id", "message"),
    [
        ("{dir}", "tiny", "--repo-id: repo id must be <namespace>/<name>, got 'tiny'"),
        ("{dir}/missing", "me/tiny", "--export-dir {dir}/missing: no such file or folder"),
    ],
)
def test_a_bad_repo_id_or_folder_exits_2_before_any_request(
    tmp_path, published, capsys, export_dir, repo_id, message
):
    status = main(["publish", "--export-dir", export_dir.format(dir=tmp_path), "--repo-id", repo_id])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and line.endswith(message.format(dir=tmp_path)) and not published
