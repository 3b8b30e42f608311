"""Feature extraction with ``jobs`` worker processes: the same shards, bytes and skip report as one job."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_pipeline.features.extract import CHUNK_ROWS, ExtractionOptions, batch_into_shards, extract_records
from asr_pipeline.io.report import InputError, SkipReport
from asr_pipeline.io.shards import shard_name, write_shard
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES, make_wav

NUM_GOOD = 2 * CHUNK_ROWS + 3  # three chunks, the last one short
BAD_INDEX = CHUNK_ROWS + 2  # in the middle of the second chunk: order across chunks matters
SHARD_SIZE = 4


def write_corpus(folder: Path) -> list[dict]:
    """Manifest rows for NUM_GOOD 22.05 kHz tones (resampled to 16 kHz) of varied length, one bad file."""
    folder.mkdir()
    rows = []
    for i in range(NUM_GOOD + 1):
        path = folder / f"utt{i:02d}.wav"
        if i == BAD_INDEX:
            path.write_bytes(b"this is not audio" * 8)
        else:
            path.write_bytes(make_wav(seconds=0.3 + 0.05 * i, freq=200.0 + 30 * i))
        text = TINY_SENTENCES[i % len(TINY_SENTENCES)]
        rows.append(
            {"id": f"utt{i:02d}", "location": f"m.jsonl:{i + 1}", "audio_path": str(path), "text": text}
        )
    return rows


def extract_to_folder(rows: list[dict], tokenizer: CTCTokenizer, output: Path, jobs: int) -> dict:
    """Shards written as the features stage writes them; returns the skip report."""
    options = ExtractionOptions.from_dict({"shard_size": SHARD_SIZE, "jobs": jobs})
    report = SkipReport()
    output.mkdir()
    records = extract_records(rows, tokenizer, options, report, total=len(rows))
    for index, table in enumerate(batch_into_shards(records, options.shard_size)):
        write_shard(table, output / shard_name(index))
    return report.to_dict()


@pytest.fixture(scope="module")
def corpus_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return write_corpus(tmp_path_factory.mktemp("extract") / "audio")


@pytest.fixture(scope="module")
def tokenizer(spm_model: bytes) -> CTCTokenizer:
    return CTCTokenizer(spm_model)


@pytest.fixture(scope="module")
def one_and_two_jobs(tmp_path_factory, corpus_rows, tokenizer) -> dict[int, tuple[Path, dict]]:
    outputs = {}
    for jobs in (1, 2):
        folder = tmp_path_factory.mktemp(f"jobs{jobs}") / "shards"
        outputs[jobs] = folder, extract_to_folder(corpus_rows, tokenizer, folder, jobs)
    return outputs


def test_two_jobs_write_byte_identical_shards_to_one_job(one_and_two_jobs):
    (one_folder, _), (two_folder, _) = one_and_two_jobs[1], one_and_two_jobs[2]
    names = sorted(path.name for path in one_folder.iterdir())

    assert len(names) == 5, "19 kept examples in shards of 4"
    assert names == sorted(path.name for path in two_folder.iterdir())
    for name in names:
        assert (one_folder / name).read_bytes() == (two_folder / name).read_bytes(), name


def test_two_jobs_skip_and_count_the_bad_file_exactly_as_one_job(one_and_two_jobs):
    one_report, two_report = one_and_two_jobs[1][1], one_and_two_jobs[2][1]

    assert (one_report["seen"], one_report["kept"], one_report["skipped"]) == (NUM_GOOD + 1, NUM_GOOD, 1)
    assert one_report["skipped_by_reason"] == {"undecodable audio": 1}
    assert f"utt{BAD_INDEX:02d}.wav" in one_report["first_skipped"]["undecodable audio"][0]
    assert two_report == one_report


@pytest.mark.parametrize("jobs", [1, 2])
def test_strict_mode_stops_at_the_bad_file_with_the_same_message_for_any_jobs(corpus_rows, tokenizer, jobs):
    options = ExtractionOptions.from_dict({"strict": True, "jobs": jobs})
    records = extract_records(corpus_rows, tokenizer, options, SkipReport(strict=True))

    with pytest.raises(InputError) as error:
        list(records)

    bad = corpus_rows[BAD_INDEX]
    assert str(error.value).startswith(f"{bad['location']}: undecodable audio ({bad['audio_path']}: ")
    assert str(error.value).endswith("Fix the record or run in lenient mode to skip and count it.")


def test_jobs_below_one_is_rejected_naming_the_option():
    with pytest.raises(ValueError, match=r"params\.yaml features: jobs must be >= 1, got 0"):
        ExtractionOptions.from_dict({"jobs": 0})


def test_workers_alone_write_the_same_bytes_as_one_job(
    tmp_path, corpus_rows, tokenizer, one_and_two_jobs, monkeypatch
):
    # By default this process featurizes rows itself until a worker is up, which on a corpus this small can
    # be every row; with that off, every row goes through the forkserver workers.
    monkeypatch.setattr("asr_pipeline.features.extract.HELP_WHILE_WORKERS_START", False)
    one_folder, one_report = one_and_two_jobs[1]

    report = extract_to_folder(corpus_rows, tokenizer, tmp_path / "workers", jobs=2)

    assert report == one_report
    for path in sorted(one_folder.iterdir()):
        assert (tmp_path / "workers" / path.name).read_bytes() == path.read_bytes(), path.name
