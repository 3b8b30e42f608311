"""The README's "Train on your own data", done as written on a small corpus that is not the demo, with the real
`dvc add` / `dvc repro`: every original file of the corpus is intact afterwards, and the demo
never writes into it."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr_pipeline.pipelines.splits import EVAL_SPLITS
from tests.test_dvc_pipeline import TINY_PARAMS, copy_project, git_commit, run, stages_run

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng (make setup)")

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


def point_globals_at(project: Path, corpus: str) -> None:
    """Step 2 of the README: the four lines of conf/base/globals.yml."""
    path = project / "conf" / "base" / "globals.yml"
    lines = []
    for line in path.read_text().splitlines():
        key = line.strip().split(":")[0]
        new = {
            "corpus": corpus,
            "raw_train": f"{corpus}/train",
            "raw_dev": f"{corpus}/dev.jsonl",
            "raw_test": f"{corpus}/test.jsonl",
        }.get(key)
        lines.append(f"  {key}: {new}" if new and line.startswith("  ") else line)
    path.write_text("\n".join(lines) + "\n")


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
        assert (
            json.loads((project / "data" / "metrics" / f"evaluate_{split}.json").read_text())["utterances"]
            == 6
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
