"""``asr-pipeline serve``: the flags reach ``serve.app.serve`` as paths and ServeOptions, and what cannot be
served (a missing path, --lexicon without --lm, a bad port or limit) exits 2 with one line before anything
starts (the page itself: tests/serve/test_app.py)."""

from __future__ import annotations

import pytest

from asr_pipeline.cli import main
from asr_pipeline.serve import app
from asr_pipeline.serve.options import ServeOptions


@pytest.fixture
def served(monkeypatch) -> list[dict]:
    """What serve was called with, instead of a web server."""
    calls = []
    monkeypatch.setattr(app, "serve", lambda run_dir, **kwargs: calls.append({"run_dir": run_dir, **kwargs}))
    return calls


def test_the_flags_become_serves_paths_address_and_options(tmp_path, served):
    (tmp_path / "lm.bin").write_bytes(b"")
    status = main(
        ["serve", "--run-dir", str(tmp_path), "--lm", str(tmp_path / "lm.bin"), "--port", "8080",
         "--max-duration-sec", "30", "--checkpoint", "latest"]
    )  # fmt: skip
    assert status == 0
    [call] = served
    assert (call["run_dir"], call["lm"], call["lexicon"]) == (tmp_path, tmp_path / "lm.bin", None)
    assert (call["host"], call["port"]) == ("127.0.0.1", 8080)  # this machine only unless asked
    assert call["options"] == ServeOptions(max_duration_sec=30.0, checkpoint="latest")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lexicon", "{dir}"], "--lexicon needs --lm (the word KenLM the lexicon search fuses)"),
        (["--port", "70000"], "--port must be 1-65535, got 70000"),
        (["--max-upload-mb", "0"], "--max-upload-mb must be > 0, got 0.0"),
        (["--lm", "{dir}/missing.bin"], "--lm {dir}/missing.bin: no such file or folder"),
    ],
)
def test_what_cannot_be_served_exits_2_with_one_line(tmp_path, served, capsys, flags, message):
    status = main(["serve", "--run-dir", str(tmp_path), *(f.format(dir=tmp_path) for f in flags)])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and line.endswith(message.format(dir=tmp_path)) and not served


def test_train_runs_serves_the_training_page_and_refuses_a_run_dir_beside_it(tmp_path, monkeypatch, capsys):
    from asr_pipeline.serve import train_page

    calls = []
    monkeypatch.setattr(train_page, "serve_train_page", lambda runs, **kwargs: calls.append((runs, kwargs)))
    assert main(["serve", "--train-runs", str(tmp_path), "--port", "8081"]) == 0
    assert calls == [(str(tmp_path), {"host": "127.0.0.1", "port": 8081})]
    assert main(["serve", "--train-runs", str(tmp_path), "--run-dir", str(tmp_path)]) == 2
    assert "leave --run-dir out" in capsys.readouterr().err
    assert main(["serve"]) == 2
    assert "--run-dir is required" in capsys.readouterr().err
