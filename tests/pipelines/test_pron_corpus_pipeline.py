"""The `pron_corpus` stage: the labelled pronunciation demo set written in SpeechOcean762's layout under its own
folder, readable by our SpeechOcean762 reader, and refused over someone else's data."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_pipeline.io.datasets import DemoCorpusDataset
from asr_pipeline.io.report import SkipReport
from asr_pipeline.pipelines.pron_corpus import create_pipeline
from asr_pipeline.pron.speechocean import iter_speechocean
from tests.pipelines.conftest import run_stage

PARAMS = {"pron": {"demo": {"train_size": 3, "test_size": 2, "max_words": 2, "seed": 5}}}


def test_the_stage_writes_a_speechocean_layout_set_the_reader_reads(tmp_path):
    folder = tmp_path / "pron_demo"
    run_stage(create_pipeline(), {}, {"pron_demo_files": DemoCorpusDataset(str(folder))}, PARAMS)

    assert (folder / "resource" / "scores.json").is_file() and (folder / ".demo_corpus").is_file()
    for split, count in (("train", 3), ("test", 2)):
        report = SkipReport(strict=True)
        utterances = list(iter_speechocean(folder, split, report))
        assert len(utterances) == count and report.kept == count
        assert all(Path(u.audio_path).is_file() for u in utterances)


def test_a_folder_of_someone_elses_files_is_refused(tmp_path):
    folder = tmp_path / "pron_demo"
    folder.mkdir()
    (folder / "mine.wav").write_bytes(b"RIFF")
    dataset = DemoCorpusDataset(str(folder), stage="pron_corpus", setting="paths.pron_demo")
    with pytest.raises(Exception, match=r"files the pron_corpus stage did not write .* paths.pron_demo in"):
        run_stage(create_pipeline(), {}, {"pron_demo_files": dataset}, PARAMS)
    assert (folder / "mine.wav").read_bytes() == b"RIFF"
