"""Feature extraction: with ``jobs`` worker processes the same shards, bytes and skip report as one job; bad
audio, untokenizable transcripts, runs that keep nothing, and extraction without a tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import dask
import numpy as np
import pytest
import soundfile
from distributed import Client, KilledWorker
from distributed.diagnostics.plugin import WorkerPlugin

from asr_pipeline.features.extract import CHUNK_ROWS, ExtractionOptions, batch_into_shards, extract_records
from asr_pipeline.io.audio import NOT_AUDIO
from asr_pipeline.io.report import InputError, NothingKeptError, SkipReport
from asr_pipeline.io.shards import shard_name, write_shard
from asr_pipeline.text.tokenizer import CTCTokenizer
from tests.conftest import TINY_SENTENCES, local_dask_cluster, make_wav

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


def extract_to_folder(
    rows: list[dict], tokenizer: CTCTokenizer, output: Path, jobs: int, executor: dict | None = None
) -> dict:
    """Shards written as the features stage writes them; returns the skip report."""
    options = ExtractionOptions.from_dict({"shard_size": SHARD_SIZE, "jobs": jobs, "executor": executor})
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
    assert one_report["skipped_by_reason"] == {NOT_AUDIO: 1}
    assert f"utt{BAD_INDEX:02d}.wav" in one_report["first_skipped"][NOT_AUDIO][0]
    assert two_report == one_report


@pytest.mark.parametrize("jobs", [1, 2])
def test_strict_mode_stops_at_the_bad_file_with_the_same_message_for_any_jobs(corpus_rows, tokenizer, jobs):
    options = ExtractionOptions.from_dict({"strict": True, "jobs": jobs})
    records = extract_records(corpus_rows, tokenizer, options, SkipReport(strict=True))

    with pytest.raises(InputError) as error:
        list(records)

    bad = corpus_rows[BAD_INDEX]
    assert str(error.value).startswith(f"{bad['location']}: {NOT_AUDIO} ({bad['audio_path']}: ")
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


# --- a Dask cluster (features.executor: dask) ------------------------------------------------------------
def assert_same_shards(expected: Path, actual: Path) -> None:
    names = sorted(path.name for path in expected.iterdir())
    assert names == sorted(path.name for path in actual.iterdir())
    for name in names:
        assert (expected / name).read_bytes() == (actual / name).read_bytes(), name


def test_a_dask_cluster_writes_byte_identical_shards_and_the_same_report(
    tmp_path, corpus_rows, tokenizer, one_and_two_jobs, dask_address
):
    one_folder, one_report = one_and_two_jobs[1]
    # Relative audio paths, as a project's manifests give them: they must reach the workers absolute.
    relative_rows = [{**row, "audio_path": os.path.relpath(row["audio_path"])} for row in corpus_rows]

    report = extract_to_folder(
        relative_rows,
        tokenizer,
        tmp_path / "dask",
        jobs=2,
        executor={"kind": "dask", "address": dask_address},
    )

    assert report == one_report
    assert_same_shards(one_folder, tmp_path / "dask")


class KillFirstFeaturizingWorker(WorkerPlugin):
    """Kills the worker process that starts the first featurizing task of the run (``marker`` records that
    it happened), as a node lost mid-task would."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or "_featurize_chunk" not in str(key):
            return
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        os._exit(1)


def test_a_worker_that_dies_mid_task_has_its_task_rerun_and_the_shards_stay_identical(
    tmp_path, corpus_rows, tokenizer, one_and_two_jobs
):
    one_folder, one_report = one_and_two_jobs[1]
    marker = tmp_path / "killed"
    with local_dask_cluster(2) as cluster, Client(cluster) as client:
        client.register_plugin(KillFirstFeaturizingWorker(str(marker)))

        report = extract_to_folder(
            corpus_rows, tokenizer, tmp_path / "dask", jobs=2,
            executor={"kind": "dask", "address": cluster.scheduler_address},
        )  # fmt: skip

    assert marker.exists(), "a worker was killed mid-task"
    assert report == one_report
    assert_same_shards(one_folder, tmp_path / "dask")


def test_a_task_whose_workers_keep_dying_fails_the_run_naming_its_rows_and_writes_no_shard(
    tmp_path, corpus_rows, tokenizer
):
    marker = tmp_path / "killed"
    no_retries = dask.config.set({"distributed.scheduler.allowed-failures": 0})
    with no_retries, local_dask_cluster(1) as cluster, Client(cluster) as client:
        client.register_plugin(KillFirstFeaturizingWorker(str(marker)))

        with pytest.raises(KilledWorker) as error:
            extract_to_folder(
                corpus_rows, tokenizer, tmp_path / "dask", jobs=1,
                executor={"kind": "dask", "address": cluster.scheduler_address},
            )  # fmt: skip

    first, last = corpus_rows[0]["location"], corpus_rows[CHUNK_ROWS - 1]["location"]
    assert error.value.__notes__ == [f"while featurizing {CHUNK_ROWS} rows from {first} to {last}"]
    assert list((tmp_path / "dask").iterdir()) == []


# --- bad audio, unknown pieces, nothing kept, no tokenizer -------------------------------------------------
def audio_row(path: Path, text: str = "the cat sat", index: int = 1, **extra) -> dict:
    return {"id": path.stem, "location": f"m.jsonl:{index}", "audio_path": str(path), "text": text, **extra}


def test_non_finite_audio_is_a_counted_skip_and_a_strict_error_naming_the_file(tmp_path, tokenizer):
    samples = np.full(8000, 0.1, dtype=np.float32)
    samples[100] = np.inf
    soundfile.write(tmp_path / "inf.wav", samples, 16000, subtype="FLOAT")
    good = tmp_path / "good.wav"
    good.write_bytes(make_wav(seconds=0.5))
    rows = [audio_row(tmp_path / "inf.wav"), audio_row(good, index=2)]

    report = SkipReport()
    records = list(extract_records(rows, tokenizer, ExtractionOptions(), report))

    assert [r["id"] for r in records] == ["good"] and all(np.isfinite(r["features"]).all() for r in records)
    assert report.to_dict()["skipped_by_reason"] == {"non-finite audio samples": 1}
    with pytest.raises(InputError, match=r"m\.jsonl:1: non-finite audio samples \(.*inf\.wav: sample 100"):
        list(extract_records(rows, tokenizer, ExtractionOptions(strict=True), SkipReport(strict=True)))


def test_audio_longer_than_the_limit_is_skipped_from_its_header_without_decoding(
    tmp_path, tokenizer, monkeypatch
):
    rate = 44100
    samples = np.zeros(150 * rate, dtype=np.int16)  # 2.5 min of silence ...
    samples[: rate // 2] = 9000  # ... after a short click
    soundfile.write(tmp_path / "long.flac", samples, rate)
    short = tmp_path / "short.wav"
    short.write_bytes(make_wav(seconds=0.5, sample_rate=16000))
    real_read = soundfile.SoundFile.read
    decoded: list[int] = []

    def counting_read(sound, *args, **kwargs):
        decoded.append(sound.frames)
        return real_read(sound, *args, **kwargs)

    monkeypatch.setattr(soundfile.SoundFile, "read", counting_read)
    report = SkipReport()
    options = ExtractionOptions(max_audio_duration_sec=20.0)

    records = list(
        extract_records(
            [audio_row(tmp_path / "long.flac"), audio_row(short, index=2)], tokenizer, options, report
        )
    )

    assert [r["id"] for r in records] == ["short"]
    assert decoded == [8000], "only the short file was decoded"
    assert report.to_dict()["skipped_by_reason"] == {"longer than max_audio_duration_sec": 1}
    assert "the header declares 150000 ms" in report.examples["longer than max_audio_duration_sec"][0]


def test_transcripts_the_tokenizer_cannot_spell_are_counted_and_skipped_above_the_share(tmp_path, tokenizer):
    good = tmp_path / "good.wav"
    good.write_bytes(make_wav(seconds=0.5))
    rows = [
        audio_row(good, "the cat sat", 1, id="english"),
        audio_row(good, "the quick josé", 2, id="one-foreign-letter"),  # 1 of 10 pieces is <unk>
        audio_row(good, "привет мир", 3, id="cyrillic"),  # every piece is <unk>
    ]

    report = SkipReport()
    records = list(extract_records(rows, tokenizer, ExtractionOptions(), report))

    assert [r["id"] for r in records] == ["english", "one-foreign-letter"]
    summary = report.to_dict()
    assert summary["kept_with"] == {"unknown pieces": {"count": 1, "share": 0.5}}
    assert summary["skipped_by_reason"] == {"too many unknown pieces": 1}
    assert (
        "m.jsonl:3: too many unknown pieces (100% of the pieces of 'привет мир' are <unk>"
        in (summary["first_skipped"]["too many unknown pieces"][0])
    )
    lenient = ExtractionOptions(max_unknown_token_share=1.0)
    assert len(list(extract_records(rows, tokenizer, lenient, SkipReport()))) == 3, "1.0 never skips"
    strict = ExtractionOptions(strict=True)
    with pytest.raises(InputError, match=r"m\.jsonl:3: too many unknown pieces"):
        list(extract_records(rows, tokenizer, strict, SkipReport(strict=True)))


def test_max_unknown_token_share_outside_0_1_is_rejected_naming_the_option():
    with pytest.raises(
        ValueError, match=r"params\.yaml features: max_unknown_token_share must lie in \[0, 1\]"
    ):
        ExtractionOptions.from_dict({"max_unknown_token_share": 1.5})


def test_extraction_that_keeps_nothing_raises_with_the_skips_instead_of_yielding_nothing(tmp_path, tokenizer):
    rows = [audio_row(tmp_path / "gone.wav"), audio_row(tmp_path / "also-gone.wav", index=2)]

    with pytest.raises(NothingKeptError, match=r"all 2 records were skipped.*missing file: 2"):
        list(extract_records(rows, tokenizer, ExtractionOptions(), SkipReport()))


def test_without_a_tokenizer_records_keep_their_text_and_given_tokens_and_nothing_else(tmp_path):
    good = tmp_path / "good.wav"
    good.write_bytes(make_wav(seconds=0.5))
    rows = [
        audio_row(good, "привет мир", 1, id="text-only"),
        audio_row(good, None, 2, id="unlabelled"),
        audio_row(good, None, 3, id="tokens-given", tokens=[3, 4]),
    ]
    report = SkipReport()

    records = list(extract_records(rows, None, ExtractionOptions(), report))

    assert [(r["id"], r["tokens"], r["text"]) for r in records] == [
        ("text-only", [], "привет мир"),
        ("unlabelled", [], None),
        ("tokens-given", [3, 4], None),
    ]
    assert report.kept == 3 and "kept_with" not in report.to_dict(), "no tokenizer: no <unk> to count"


# --- augmentation: cached variants and condition splits --------------------------------------------------
MIX = {
    "seed": 3,
    "conditions": [
        {"name": "clean", "weight": 1.0, "kind": "clean"},
        {"name": "fast", "weight": 1.0, "kind": "speed", "factor": 1.25},
        {"name": "noisy", "weight": 1.0, "kind": "noise", "noise": "white", "snr_db": 10},
    ],
}


def extract_with(rows: list[dict], tokenizer: CTCTokenizer, augmentation: dict | None, jobs: int = 1):
    options = ExtractionOptions.from_dict({"augmentation": augmentation, "jobs": jobs})
    report = SkipReport()
    return list(extract_records(rows, tokenizer, options, report)), report.to_dict()


def test_each_utterance_is_featurized_under_the_condition_drawn_for_its_id(corpus_rows, tokenizer):
    clean, _ = extract_with(corpus_rows, tokenizer, None)
    mixed, report = extract_with(corpus_rows, tokenizer, MIX)
    from asr_pipeline.augment import AugmentationMix

    drawn = {row["id"]: AugmentationMix.from_dict(MIX, "mix").choose(row["id"])[0] for row in corpus_rows}
    kept = [record["id"] for record in mixed]
    counts = {name: sum(drawn[i] == name for i in kept) for name in ("clean", "fast", "noisy")}
    assert all(counts.values()), f"every condition is drawn in {len(kept)} utterances: {counts}"
    assert {k: v["count"] for k, v in report["kept_with"].items() if k.startswith("condition")} == {
        f"condition {name}": count for name, count in counts.items()
    }
    for before, after in zip(clean, mixed, strict=True):
        condition = drawn[after["id"]]
        assert after["text"] == before["text"] and after["tokens"] == before["tokens"], (
            "transcripts unchanged"
        )
        if condition == "clean":
            assert np.array_equal(after["features"], before["features"])
        elif condition == "fast":  # 1.25x speed: 1/1.25 of the duration, fewer frames
            assert after["duration_ms"] == pytest.approx(before["duration_ms"] / 1.25, abs=1)
            assert after["features"].shape[0] < before["features"].shape[0]
        else:  # noise: same length, different features
            assert after["duration_ms"] == before["duration_ms"]
            assert not np.allclose(after["features"], before["features"])


def test_augmented_extraction_is_identical_run_to_run_and_for_any_number_of_jobs(corpus_rows, tokenizer):
    once, _ = extract_with(corpus_rows, tokenizer, MIX)
    again, _ = extract_with(corpus_rows, tokenizer, MIX, jobs=2)
    assert [r["id"] for r in once] == [r["id"] for r in again]
    assert all(np.array_equal(a["features"], b["features"]) for a, b in zip(once, again, strict=True))


def test_a_bad_augmentation_is_refused_naming_the_option():
    with pytest.raises(ValueError, match="snr"):
        ExtractionOptions.from_dict(
            {"augmentation": {"conditions": [{"name": "n", "weight": 1, "kind": "noise", "snr": 3}]}}
        )
