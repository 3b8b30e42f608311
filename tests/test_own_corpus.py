"""The README's "Train on your own data", done as written on a small corpus that is not the demo, with the real
`dvc add` / `dvc import-url` / `dvc repro`: the corpus is a DVC input like any other (checkout, gc, push and
pull keep it), every original file of it is intact afterwards, and the demo never writes into it."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_pipeline.pipelines.splits import EVAL_SPLITS
from tests.conftest import PROJECT_ROOT, make_wav
from tests.test_dvc_pipeline import TINY_PARAMS, copy_project, git_commit, run, stages_run

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng (make setup)")

SENTENCES = [
    "the river runs past the mill",
    "a red kite flies over the hill",
    "we bake fresh bread on sunday",
    "my sister grows tall sunflowers",
    "the old clock stopped at noon",
    "bring two cups of warm milk",
    "the farmer feeds his sheep",
    "snow covers the quiet valley",
    "please close the garden gate",
    "four boats sail into the harbour",
    "the baker sells sweet buns",
    "a green frog sits on a stone",
]
OWN_CORPUS_PARAMS = {key: value for key, value in TINY_PARAMS.items() if key != "demo_corpus"}


def speak(text: str, path: Path, voice: str, stereo_44k_flac: bool = False) -> None:
    """espeak-ng speech as 22.05 kHz mono WAV, or re-encoded as 44.1 kHz stereo FLAC."""
    wav = path.with_suffix(".wav")
    subprocess.run(["espeak-ng", "-v", voice, "-s", "150", "-w", str(wav), text], check=True)
    if stereo_44k_flac:
        audio, rate = sf.read(wav, dtype="float32")
        audio = np.interp(np.arange(0, len(audio), rate / 44100), np.arange(len(audio)), audio)
        sf.write(path.with_suffix(".flac"), np.stack([audio, audio], axis=1), 44100)
        wav.unlink()


def make_corpus(root: Path) -> None:
    """train: nested audio folders with .txt sidecars (some 44.1 kHz stereo FLAC); dev/test: JSONL manifests
    whose relative audio paths resolve against the manifest's folder; plus a file no stage reads."""
    for i in range(24):
        text = SENTENCES[i % len(SENTENCES)]
        path = root / "train" / f"speaker{i % 3}" / f"utt{i:03d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        speak(text, path, voice=["en-us", "en", "en-gb-x-rp"][i % 3], stereo_44k_flac=i % 4 == 0)
        path.with_suffix(".txt").write_text(text + "\n")
    for split, offset in (("dev", 1), ("test", 5)):
        rows = []
        for i in range(6):
            text = SENTENCES[(i + offset) % len(SENTENCES)]
            (root / split).mkdir(parents=True, exist_ok=True)
            speak(text, root / split / f"{split}{i}", voice="en-us+f3")
            rows.append(json.dumps({"audio_path": f"{split}/{split}{i}.wav", "text": text}))
        (root / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    (root / "README.txt").write_text("recorded in the lab, 2026; do not delete\n")


def digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def readme_step_1() -> tuple[list[str], list[str]]:
    """Step 1 of the README's "Train on your own data", as written there: its commands (copy the recordings in,
    `dvc add`, `git add`) and the commands for data that lives elsewhere (`dvc import-url`)."""
    section = (PROJECT_ROOT / "README.md").read_text().split("## Train on your own data", 1)[1]
    step = section.split("# 1.", 1)[1].split("# 2.", 1)[0]
    commands = [
        line.strip() for line in step.splitlines()[1:] if line.strip() and not line.strip().startswith("#")
    ]
    elsewhere = step.split("data that lives elsewhere:", 1)[1].split(")", 1)[0]
    return commands, re.findall(r"`([^`]+)`", elsewhere)


def make_small_corpus(root: Path) -> Path:
    """A few short WAV files in nested folders, a manifest naming them, and a file no stage reads."""
    for i in range(4):
        path = root / "train" / f"speaker{i % 2}" / f"utt{i}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make_wav(0.2, freq=300.0 + 50 * i))
    rows = [json.dumps({"audio_path": f"train/speaker{i % 2}/utt{i}.wav", "text": "a b"}) for i in range(4)]
    (root / "train.jsonl").write_text("\n".join(rows) + "\n")
    (root / "README.txt").write_text("recorded in the lab, 2026; do not delete\n")
    return root


def dvc_stages(project: Path) -> list[str]:
    """What DVC's index holds: the README's check, `Repo().index.stages`, run in the project."""
    code = "from dvc.repo import Repo; print('\\n'.join(s.addressing for s in Repo().index.stages))"
    return run([sys.executable, "-c", code], project).stdout.split()


def assert_a_first_class_dvc_input(
    project: Path, corpus: str, before: dict[str, str], tmp_path: Path
) -> None:
    """``corpus``, committed with its .dvc pointer, is in DVC's index; `dvc checkout` restores it (a lost file
    back, nothing removed); `dvc gc -w -f` keeps its cache; `dvc push` sends it and a teammate's `dvc pull`
    gets it, byte for byte."""
    folder = project / corpus
    assert f"{corpus}.dvc" in dvc_stages(project), "DVC sees the pointer"
    assert run(["git", "status", "--porcelain", "-uall", "data"], project).stdout == "", (
        "the pointer is committed, the data stays out of git and nothing new appears"
    )

    # A user restores a stage's outputs (or a lost file of the corpus) with a plain `dvc checkout`. Its exit
    # status is not 0 here: the pipeline's stages never ran, so their outputs are missing.
    (folder / "train" / "speaker0" / "utt0.wav").unlink()
    checkout = run(["dvc", "checkout"], project, check=False)
    assert digests(folder) == before, f"dvc checkout: the corpus restored, not removed\n{checkout.stdout}"
    assert corpus not in checkout.stderr

    run(["dvc", "gc", "-w", "-f"], project)
    shutil.rmtree(folder)
    run(["dvc", "checkout", f"{corpus}.dvc"], project)
    assert digests(folder) == before, "dvc gc -w kept the corpus's cache"

    run(["dvc", "remote", "add", "-d", "team", str(tmp_path / "remote")], project)
    git_commit(project, "team remote", ".dvc/config")
    run(["dvc", "push"], project)
    teammate = tmp_path / "teammate"
    run(["git", "clone", "-q", str(project), str(teammate)], tmp_path)
    pull = run(["dvc", "pull"], teammate, check=False)  # not 0 either: the stages' outputs were never pushed
    assert (teammate / corpus).is_dir(), f"dvc pull brought the corpus\n{pull.stdout}\n{pull.stderr}"
    assert digests(teammate / corpus) == before
    assert corpus not in pull.stderr


def test_a_corpus_added_as_the_readme_says_is_kept_by_checkout_and_gc_and_pushed_and_pulled(tmp_path):
    project = copy_project(tmp_path / "project", OWN_CORPUS_PARAMS)
    recordings = make_small_corpus(tmp_path / "recordings")
    before = digests(recordings)
    commands, _ = readme_step_1()
    assert any(command.startswith("dvc add data/01_raw/mycorpus") for command in commands), commands

    for command in commands:
        run(["bash", "-ec", command.replace("/path/to/recordings", str(recordings))], project)
    git_commit(project, "my corpus", "data/01_raw/mycorpus.dvc")

    assert digests(project / "data" / "01_raw" / "mycorpus") == before
    assert_a_first_class_dvc_input(project, "data/01_raw/mycorpus", before, tmp_path)


def test_a_corpus_imported_with_import_url_is_kept_by_checkout_and_gc_and_pushed_and_pulled(tmp_path):
    project = copy_project(tmp_path / "project", OWN_CORPUS_PARAMS)
    elsewhere = make_small_corpus(tmp_path / "mnt" / "corpora" / "mycorpus")
    before = digests(elsewhere)
    _, commands = readme_step_1()
    assert any(command.startswith("dvc import-url") for command in commands), commands

    for command in commands:
        run(["bash", "-ec", command.replace("/mnt/corpora/mycorpus", str(elsewhere))], project)
    git_commit(project, "my corpus, imported", "data/01_raw/mycorpus.dvc")
    elsewhere.rename(elsewhere.with_name("gone"))  # the teammate cannot reach it: the pull is the remote's

    assert digests(project / "data" / "01_raw" / "mycorpus") == before
    assert_a_first_class_dvc_input(project, "data/01_raw/mycorpus", before, tmp_path)


def point_globals_at(project: Path, corpus: str) -> None:
    """Step 2 of the README: the five lines of conf/base/globals.yml (no open test set: raw_test_open null)."""
    path = project / "conf" / "base" / "globals.yml"
    lines = []
    for line in path.read_text().splitlines():
        key = line.strip().split(":")[0]
        new = {
            "corpus": corpus,
            "raw_train": f"{corpus}/train",
            "raw_dev": f"{corpus}/dev.jsonl",
            "raw_test": f"{corpus}/test.jsonl",
            "raw_test_open": "null",
        }.get(key)
        lines.append(f"  {key}: {new}" if new and line.startswith("  ") else line)
    path.write_text("\n".join(lines) + "\n")


@needs_espeak
@pytest.mark.slow  # the whole README route through dvc repro: ~2-3 min
def test_the_readme_route_trains_on_your_corpus_and_leaves_every_file_of_it_intact(tmp_path):
    project = copy_project(tmp_path / "project", OWN_CORPUS_PARAMS)
    corpus = project / "data" / "01_raw" / "mycorpus"
    make_corpus(corpus)
    before = digests(corpus)

    run(["dvc", "add", "data/01_raw/mycorpus"], project)
    git_commit(project, "corpus", "data/01_raw/mycorpus.dvc")
    point_globals_at(project, "data/01_raw/mycorpus")
    repro = run(["dvc", "repro", "evaluate"], project)

    assert stages_run(repro.stdout) == {
        "transcripts", "tokenizer", "features", "conditions", "index", "lm", "train", "tune_decoding",
        *(f"evaluate@{split}" for split in EVAL_SPLITS),
    }  # fmt: skip
    assert digests(corpus) == before, "not one file of the corpus changed, moved or appeared"
    assert not (project / "data" / "01_raw" / "demo").exists(), "the demo was not synthesized"
    transcripts = json.loads((project / "data" / "metrics" / "transcripts_train.json").read_text())
    assert transcripts["kept"] == 24 and transcripts["skipped"] == 0
    for split in EVAL_SPLITS:
        assert json.loads((project / "data" / "metrics" / f"evaluate_{split}.json").read_text())[
            "utterances"
        ] == (0 if split == "test_open" else 6), (
            "a corpus without an open test set still runs: its test_open is empty"
        )
    # Never run: the demo, and the pronunciation scoring's demo set and phone targets, which the evaluation
    # does not need.
    never_run = {"demo_corpus", "pron_corpus", "pron_phones"}
    assert set(json.loads(run(["dvc", "status", "--json"], project).stdout)) == never_run
    assert run(["git", "status", "--porcelain", "data/01_raw"], project).stdout == "", (
        "the data stays out of git"
    )

    # The demo, built on request afterwards, goes to its own folder only.
    run(["dvc", "repro", "demo_corpus"], project)
    assert (project / "data" / "01_raw" / "demo" / "dev.jsonl").is_file()
    assert digests(corpus) == before
    stale = set(json.loads(run(["dvc", "status", "--json"], project).stdout))
    assert stale == {"pron_corpus", "pron_phones"}, (
        "the stages read your corpus, not the demo (the pron_* never ran)"
    )


@needs_espeak
def test_pointing_the_demo_at_your_data_fails_the_stage_and_deletes_nothing(tmp_path):
    project = copy_project(tmp_path / "project", TINY_PARAMS)
    corpus = project / "data" / "01_raw" / "mycorpus"
    (corpus / "train").mkdir(parents=True)
    (corpus / "train" / "utt1.txt").write_text("my own words\n")
    (corpus / "dev.jsonl").write_text('{"audio_path": "train/utt1.wav", "text": "my own words"}\n')
    before = digests(corpus)
    globals_path = project / "conf" / "base" / "globals.yml"
    globals_path.write_text(globals_path.read_text().replace("  demo: data/01_raw/demo", f"  demo: {corpus}"))

    result = run(["dvc", "repro", "demo_corpus"], project, check=False)

    assert result.returncode != 0
    assert "holds files the demo_corpus stage did not write" in result.stdout + result.stderr
    assert digests(corpus) == before, "DVC did not delete it first, and the demo did not write into it"
