"""The short table `make demo` ends with, from the evaluate stage's metrics files."""

from __future__ import annotations

import json

from asr_pipeline.decoding.results import main, open_test_table, results_table, split_metrics


def write(folder, split, **row):
    (folder / f"evaluate_{split}.json").write_text(json.dumps(row))


def test_the_table_has_one_row_per_split_and_cer_wer_per_decoder(tmp_path):
    write(tmp_path, "test_noisy", utterances=150, greedy={"cer": 30.0, "wer": 70.0})
    write(
        tmp_path,
        "test",
        utterances=150,
        greedy={"cer": 12.04, "wer": 40.0},
        lexicon={"cer": 8.0, "wer": 14.96},
    )
    write(
        tmp_path, "dev", utterances=150, greedy={"cer": 11.0, "wer": 38.0}, lexicon={"cer": 7.5, "wer": 14.0}
    )

    metrics = split_metrics(tmp_path)
    table = results_table(metrics).splitlines()

    assert list(metrics) == ["dev", "test", "test_noisy"], "dev and test first, then the conditions"
    assert table[0] == "| split | utterances | greedy CER / WER | lexicon CER / WER |"
    assert table[3] == "| test | 150 | 12.0 / 40.0 | 8.0 / 15.0 |"
    assert table[4] == "| test_noisy | 150 | 30.0 / 70.0 | - |", "a decoder a split was not scored with"


def test_test_and_the_open_test_set_stand_side_by_side_with_their_cer_ratio(tmp_path):
    write(tmp_path, "test_noisy", utterances=150, greedy={"cer": 30.0, "wer": 70.0})
    write(
        tmp_path, "test", utterances=150, greedy={"cer": 10.0, "wer": 30.0}, lexicon={"cer": 8.0, "wer": 15.0}
    )
    write(
        tmp_path,
        "test_open",
        utterances=147,
        greedy={"cer": 14.0, "wer": 45.0},
        lexicon={"cer": 16.0, "wer": 40.0},
    )
    write(tmp_path, "dev", utterances=150, greedy={"cer": 11.0, "wer": 38.0})

    metrics = split_metrics(tmp_path)
    table = open_test_table(metrics).splitlines()

    assert list(metrics) == ["dev", "test", "test_open", "test_noisy"], "test_open right below test"
    assert table[0].startswith("| decoder | test CER / WER | test_open CER / WER | test_open / test CER")
    assert table[2:] == [
        "| greedy | 10.0 / 30.0 | 14.0 / 45.0 | 1.40 |",
        "| lexicon | 8.0 / 15.0 | 16.0 / 40.0 | 2.00 |",
    ]


def test_a_corpus_without_an_open_test_set_gets_no_side_by_side_table(tmp_path, capsys):
    write(tmp_path, "test", utterances=150, greedy={"cer": 10.0, "wer": 30.0})
    write(tmp_path, "test_open", utterances=0)  # paths.raw_test_open: null
    globals_file = tmp_path / "globals.yml"
    globals_file.write_text(f"paths:\n  metrics: {tmp_path}\n  train: {tmp_path / 'train'}\n")

    assert open_test_table(split_metrics(tmp_path)) is None
    assert main(["--globals", str(globals_file)]) == 0
    out = capsys.readouterr().out
    assert "| test_open | 0 | - |" in out and "test_open CER / WER" not in out


def test_without_evaluation_results_it_says_what_to_run(tmp_path, capsys):
    globals_file = tmp_path / "globals.yml"
    globals_file.write_text(f"paths:\n  metrics: {tmp_path / 'metrics'}\n  train: {tmp_path / 'train'}\n")
    (tmp_path / "metrics").mkdir()

    assert main(["--globals", str(globals_file)]) == 1
    assert "run `dvc repro` first" in capsys.readouterr().err

    write(tmp_path / "metrics", "test", utterances=3, greedy={"cer": 1.0, "wer": 2.0})
    assert main(["--globals", str(globals_file)]) == 0
    out = capsys.readouterr().out
    assert "| test | 3 | 1.0 / 2.0 |" in out and f"{tmp_path / 'train'}/run" in out
