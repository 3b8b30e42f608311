"""The bad-input matrix (issue 3): every kind of bad record, in strict and in lenient mode, through the real
readers and stage nodes (transcripts -> features) and through ``asr-pipeline extract-features``.

Each case is one manifest holding a good record and one bad one. Strict: the run stops with one message
naming the file, the line (or row, or audio file) and what was wrong. Lenient: the bad record is skipped and
counted under its reason, with its location, and kept + skipped == seen in every report.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asr_pipeline.cli import main
from asr_pipeline.io.audio import NOT_AUDIO
from asr_pipeline.io.datasets import Manifest
from asr_pipeline.io.report import InputError
from asr_pipeline.options import ConfigError
from asr_pipeline.pipelines.features.nodes import extract_features
from asr_pipeline.pipelines.transcripts.nodes import normalize_manifest
from tests.conftest import make_wav

GOOD = {"id": "good", "audio_path": "good.wav", "text": "the cat"}
F = 80  # --input-dim / features.input_dim in these runs


@dataclass(frozen=True)
class Case:
    """A manifest with one bad record; where it is caught, under which reason, and at which location."""

    build: Callable[[Path], tuple[Path, str]]  # folder -> (manifest, location of the bad record)
    reason: str
    stage: str  # "transcripts" or "features"


def jsonl(folder: Path, bad: dict | bytes, name: str = "m.jsonl") -> tuple[Path, str]:
    """GOOD on line 1, ``bad`` (a record, or raw bytes for a broken line) on line 2."""
    (folder / "good.wav").write_bytes(make_wav(seconds=0.5))
    line = bad if isinstance(bad, bytes) else json.dumps(bad).encode()
    path = folder / name
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + line + b"\n")
    return path, f"{path}:2"


def audio_record(content: bytes) -> Callable[[Path], tuple[Path, str]]:
    def build(folder: Path) -> tuple[Path, str]:
        (folder / "bad.wav").write_bytes(content)
        return jsonl(folder, {"id": "bad", "audio_path": "bad.wav", "text": "a dog"})

    return build


def record(fields: dict) -> Callable[[Path], tuple[Path, str]]:
    return lambda folder: jsonl(folder, {"id": "bad", "text": "a dog", **fields})


def feature_file(
    name: str, write: Callable[[Path], None], **shape: int
) -> Callable[[Path], tuple[Path, str]]:
    def build(folder: Path) -> tuple[Path, str]:
        write(folder / name)
        return jsonl(folder, {"id": "bad", "features_path": name, "tokens": [3, 4], **shape})

    return build


def parquet_bad_audio_bytes(folder: Path) -> tuple[Path, str]:
    path = folder / "m.parquet"
    table = pa.table(
        {"id": ["good", "bad"], "text": ["the cat", "a dog"], "audio_bytes": [make_wav(), b"junk" * 20]}
    )
    pq.write_table(table, path)
    return path, f"{path}:row 1"


def audio_folder_silent_file(folder: Path) -> tuple[Path, str]:
    corpus = folder / "corpus"
    corpus.mkdir()
    (corpus / "a.wav").write_bytes(make_wav())
    (corpus / "b.wav").write_bytes(make_wav(freq=0.0))  # sin(0) = 0: digital silence
    for name in ("a", "b"):
        (corpus / f"{name}.txt").write_text("the cat")
    return corpus, str(corpus / "b.wav")


def duplicate_id(folder: Path) -> tuple[Path, str]:
    return jsonl(folder, {**GOOD, "text": "a dog"})


CASES = {
    "missing audio file": Case(record({"audio_path": "absent.wav"}), "missing file", "features"),
    "missing feature file": Case(record({"features_path": "absent.npy"}), "missing file", "features"),
    "zero-byte audio": Case(audio_record(b""), "empty audio", "features"),
    "truncated audio": Case(audio_record(make_wav(seconds=1.0)[:8000]), "truncated audio", "features"),
    # Bytes that sniff as no audio container are refused before any decoder sees them (io.audio).
    "undecodable audio": Case(audio_record(b"not audio at all" * 8), NOT_AUDIO, "features"),
    "undecodable embedded audio bytes": Case(parquet_bad_audio_bytes, NOT_AUDIO, "features"),
    "silent audio": Case(audio_record(make_wav(freq=0.0)), "silent audio", "features"),
    "silent audio in a folder": Case(audio_folder_silent_file, "silent audio", "features"),
    "empty audio": Case(audio_record(make_wav(seconds=0.0)), "empty audio", "features"),
    "empty transcript": Case(
        record({"audio_path": "good.wav", "text": " ?! "}), "empty transcript", "transcripts"
    ),
    "token ids outside the vocabulary": Case(
        record({"audio_path": "good.wav", "tokens": [3, 999]}), "token id outside the vocabulary", "features"
    ),
    "non-numeric inline features": Case(
        record({"features": [[0.5] * (F - 1) + ["x"]]}), "non-numeric features", "transcripts"
    ),
    "non-numeric feature file": Case(
        feature_file("f.txt", lambda p: p.write_text(" ".join(["1"] * (F - 1) + ["x"]) + "\n")),
        "non-numeric features",
        "features",
    ),
    "rows*cols not matching inline features": Case(
        record({"features": [0.5] * (F + 1), "rows": 1, "cols": F}), "rows*cols does not match", "transcripts"
    ),
    "rows*cols not matching a feature file": Case(
        feature_file("f.txt", lambda p: p.write_text(" ".join(["1"] * F)), rows=2, cols=F),
        "rows*cols does not match",
        "features",
    ),
    "NaN inline features": Case(
        record({"features": [[float("nan")] * F]}), "NaN/Inf features", "transcripts"
    ),
    "Inf in a .npy feature file": Case(
        feature_file("f.npy", lambda p: np.save(p, np.full((2, F), np.inf, dtype=np.float32))),
        "NaN/Inf features",
        "features",
    ),
    "feature width differing from --input-dim": Case(
        record({"features": [[0.5] * (F - 1)] * 3}), "feature width differs from input_dim", "features"
    ),
    "duplicate id": Case(duplicate_id, "duplicate id", "transcripts"),
    "invalid UTF-8": Case(
        lambda f: jsonl(f, b'{"id": "bad", "text": "caf\xe9"}'), "invalid UTF-8", "transcripts"
    ),
    "malformed JSON line": Case(
        lambda f: jsonl(f, b'{"id": "bad", "text": '), "malformed JSON", "transcripts"
    ),
}


def run_stages(manifest: Path, strict: bool, tokenizer_model: bytes) -> tuple[dict, dict]:
    """The transcripts node then the features node, as `dvc repro` runs them; returns both reports."""
    rows, transcripts_report = normalize_manifest(Manifest(manifest), {"strict": strict})
    params = {"strict": strict, "input_dim": F, "shard_size": 64}
    *_, (_, features_report) = extract_features(rows, tokenizer_model, params, {"blank_id": 0})
    return transcripts_report, features_report


def run_cli(
    tmp_path: Path, manifest: Path, strict: bool, tokenizer_model: bytes
) -> tuple[int, dict | None, str]:
    model = tmp_path / "tok.model"
    model.write_bytes(tokenizer_model)
    argv = [
        "extract-features",
        "--input",
        str(manifest),
        "--output",
        str(tmp_path / "out"),
        "--tokenizer",
        str(model),
    ]
    argv += ["--input-dim", str(F), *(["--strict"] if strict else [])]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, json.loads(out.getvalue()) if status == 0 else None, err.getvalue()


def assert_counted(report: dict, reason: str, location: str) -> None:
    assert report["skipped_by_reason"] == {reason: 1}
    assert report["first_skipped"][reason][0].startswith(f"{location}: {reason}")
    assert report["kept"] + report["skipped"] == report["seen"]


@pytest.mark.parametrize("name", CASES)
def test_lenient_stages_skip_and_count_the_bad_record_by_reason(name, tmp_path, spm_model):
    case = CASES[name]
    manifest, location = case.build(tmp_path)
    transcripts, features = run_stages(manifest, strict=False, tokenizer_model=spm_model)
    caught, passed = (transcripts, features) if case.stage == "transcripts" else (features, transcripts)
    assert_counted(caught, case.reason, location)
    assert passed["skipped"] == 0 and passed["kept"] == passed["seen"]
    assert features["kept"] == 1  # the good record survives


@pytest.mark.parametrize("name", CASES)
def test_strict_stages_stop_with_one_message_naming_file_line_and_problem(name, tmp_path, spm_model):
    case = CASES[name]
    manifest, location = case.build(tmp_path)
    with pytest.raises(InputError) as error:
        run_stages(manifest, strict=True, tokenizer_model=spm_model)
    message = str(error.value)
    assert message.startswith(f"{location}: {case.reason}") and "\n" not in message


@pytest.mark.parametrize("name", CASES)
def test_lenient_extract_features_counts_the_bad_record_in_its_printed_report(name, tmp_path, spm_model):
    case = CASES[name]
    manifest, location = case.build(tmp_path)
    status, report, err = run_cli(tmp_path, manifest, strict=False, tokenizer_model=spm_model)
    assert status == 0, err
    assert_counted(report, case.reason, location)
    assert report["kept"] == 1


@pytest.mark.parametrize("name", CASES)
def test_strict_extract_features_exits_1_with_one_line_naming_file_line_and_problem(
    name, tmp_path, spm_model
):
    case = CASES[name]
    manifest, location = case.build(tmp_path)
    status, _, err = run_cli(tmp_path, manifest, strict=True, tokenizer_model=spm_model)
    assert status == 1
    [line] = [line for line in err.splitlines() if "error:" in line]
    assert line.startswith(f"asr-pipeline extract-features: error: {location}: {case.reason}")


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
def test_a_bom_and_crlf_line_ends_are_accepted_in_both_modes(strict, tmp_path, spm_model):
    (tmp_path / "good.wav").write_bytes(make_wav())
    manifest = tmp_path / "m.jsonl"
    lines = [json.dumps(GOOD), json.dumps({**GOOD, "id": "second", "text": "a dog"})]
    manifest.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    transcripts, features = run_stages(manifest, strict=strict, tokenizer_model=spm_model)
    assert (transcripts["seen"], transcripts["kept"], features["kept"], features["skipped"]) == (2, 2, 2, 0)


# Flags, paths and params a person gets wrong (issue 34): each ends the command with one line naming the flag
# or the params.yaml key and what is allowed, before any work is done (the one bad record here would
# otherwise fail the run first, with "all 1 records were skipped").


def broken_manifest(folder: Path) -> Path:
    """One record whose audio is not audio: reached only if the command starts extracting."""
    (folder / "bad.wav").write_bytes(b"not audio at all" * 8)
    path = folder / "m.jsonl"
    path.write_text(json.dumps({"id": "bad", "audio_path": "bad.wav", "text": "a dog"}) + "\n")
    return path


def existing_file(folder: Path) -> str:
    (folder / "notes.txt").write_text("a user's file")
    return str(folder / "notes.txt")


FLAG_CASES = {
    "--tokenizer naming an audio file": (
        lambda f: ["--tokenizer", str(f / "bad.wav"), "--output", str(f / "out")],
        "--tokenizer {f}/bad.wav: not a SentencePiece model",
    ),
    "--output naming an existing file": (
        lambda f: ["--output", existing_file(f)],
        "--output {f}/notes.txt is an existing file, not a folder",
    ),
    "--output below a file": (
        lambda f: ["--output", existing_file(f) + "/shards"],
        "--output {f}/notes.txt/shards: {f}/notes.txt is a file, so no folder can be made there",
    ),
    "--shard-size 0": (
        lambda f: ["--output", str(f / "out"), "--shard-size", "0"],
        "argument --shard-size: must be above 0, got 0",
    ),
    "--max-audio-duration-sec -5": (
        lambda f: ["--output", str(f / "out"), "--max-audio-duration-sec", "-5"],
        "argument --max-audio-duration-sec: must be above 0, got -5",
    ),
}


@pytest.mark.parametrize("name", FLAG_CASES)
def test_a_bad_extract_features_flag_exits_2_with_one_line_naming_it_before_any_work(
    name, tmp_path, spm_model
):
    build, expected = FLAG_CASES[name]
    (tmp_path / "tok.model").write_bytes(spm_model)
    argv = ["extract-features", "--input", str(broken_manifest(tmp_path))]
    argv += ["--tokenizer", str(tmp_path / "tok.model"), *build(tmp_path)]  # a later --tokenizer wins
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main(argv)
    assert status == 2
    [line] = [line for line in err.getvalue().splitlines() if "error:" in line]
    assert f"extract-features: error: {expected.format(f=tmp_path)}" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only (mode 555) folder anyway")
def test_a_read_only_output_folder_exits_2_before_any_work(tmp_path, spm_model):
    (tmp_path / "tok.model").write_bytes(spm_model)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    argv = ["extract-features", "--input", str(broken_manifest(tmp_path)), "--tokenizer"]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main([*argv, str(tmp_path / "tok.model"), "--output", str(locked / "shards")])
    assert status == 2
    assert f"--output {locked}/shards: cannot write in {locked}" in err.getvalue()


def typo_in_demo_corpus() -> None:
    from asr_pipeline.pipelines.demo_corpus.nodes import synthesize_demo_corpus

    synthesize_demo_corpus({"train_sizez": 3})


def wrong_type_in_train() -> None:
    from asr_pipeline.training.config import resolve_config

    resolve_config({"data": {"train_manifests": ["train.jsonl"]}, "optim": {"epochs": "one"}})


def vocab_size_not_a_number() -> None:
    from asr_pipeline.pipelines.tokenizer.nodes import train_tokenizer

    train_tokenizer("the cat\n", {"vocab_size": "lots"}, {})


def unknown_train_architecture() -> None:
    next(extract_features(pl.DataFrame(), b"", {"architecture": None}, {}, train_architecture="transformerz"))


PARAMS_CASES = {
    "a typo (train_sizez)": (
        typo_in_demo_corpus,
        "params.yaml demo_corpus: unknown option(s) ['train_sizez']; the known options are ['train_size',",
    ),
    "a wrong type (epochs: one)": (wrong_type_in_train, "optim.epochs: expected int, got 'one'"),
    "vocab_size: lots": (
        vocab_size_not_a_number,
        "params.yaml tokenizer.vocab_size: expected int, got 'lots'",
    ),
    "an unknown train.model.architecture": (
        unknown_train_architecture,
        "params.yaml train.model.architecture: must be one of squeezeformer, zipformer,",
    ),
}


@pytest.mark.parametrize("name", PARAMS_CASES)
def test_a_bad_params_value_is_a_config_error_naming_its_key(name):
    fail, expected = PARAMS_CASES[name]
    with pytest.raises(ConfigError) as error:
        fail()
    assert str(error.value).startswith(expected) and "\n" not in str(error.value)
