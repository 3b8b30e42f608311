"""The short results table ``make demo`` ends with: one row per evaluated split, CER and WER per decoder, and
where the model is.

It reads what the evaluate stage wrote (``<metrics>/evaluate_<split>.json``: ``{"utterances": N, "greedy":
{"cer", "wer"}, "lexicon": {...}, ...}``, in percent) and nothing else, so it shows the numbers ``dvc metrics
show`` holds, without its hundred columns.

Below it, test and the open test set (test_open: sentences written apart from the training text) side by side
per decoder, with the ratio of their CERs: how far the model's accuracy carries beyond the training text's
language (issue 35 asks for at most ``OPEN_TEST_TARGET``).

    python -m asr_pipeline.decoding.results     # the project's tables (paths from conf/base/globals.yml)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GLOBALS = Path("conf/base/globals.yml")
# Decoders in the order a reader compares them: no LM, then the lexicon-free and the lexicon + word LM searches.
DECODER_ORDER = ("greedy", "lexicon_free", "prefix_beam", "lexicon", "cuda")
FIRST_SPLITS = ("dev", "test", "test_open")
OPEN_TEST_TARGET = 1.5  # test_open CER / test CER at most (issue 35)


def split_metrics(metrics_dir: Path) -> dict[str, dict]:
    """Split -> its evaluate metrics, for every split evaluated: dev, test, test_open, then the others by name."""
    paths = {path.stem.removeprefix("evaluate_"): path for path in metrics_dir.glob("evaluate_*.json")}
    first = [split for split in FIRST_SPLITS if split in paths]
    order = first + sorted(set(paths) - set(first))
    return {split: json.loads(paths[split].read_text()) for split in order}


def results_table(metrics: dict[str, dict]) -> str:
    """A markdown table: split, utterances, then CER / WER (%) per decoder any split was scored with."""
    decoders = _scored_decoders(metrics.values())
    header = ["split", "utterances", *(f"{name} CER / WER" for name in decoders)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for split, row in metrics.items():
        cells = [split, str(row.get("utterances", ""))]
        cells += [_cer_wer(row.get(name)) for name in decoders]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def open_test_table(metrics: dict[str, dict]) -> str | None:
    """A markdown table: per decoder scored on both, test and test_open CER / WER side by side and the ratio
    test_open CER / test CER; None unless both splits were scored (a corpus without an open test set
    evaluates test_open on 0 utterances)."""
    test, open_test = metrics.get("test", {}), metrics.get("test_open", {})
    decoders = [name for name in _scored_decoders([test]) if name in _scored_decoders([open_test])]
    if not decoders:
        return None
    lines = [
        f"| decoder | test CER / WER | test_open CER / WER | test_open / test CER (target <= {OPEN_TEST_TARGET}) |",
        "|---|---|---|---|",
    ]
    for name in decoders:
        ratio = open_test[name]["cer"] / test[name]["cer"] if test[name]["cer"] else float("inf")
        lines.append(f"| {name} | {_cer_wer(test[name])} | {_cer_wer(open_test[name])} | {ratio:.2f} |")
    return "\n".join(lines)


def _scored_decoders(rows) -> list[str]:
    rows = list(rows)
    return [name for name in DECODER_ORDER if any(isinstance(row.get(name), dict) for row in rows)]


def _cer_wer(scores: object) -> str:
    return f"{scores['cer']:.1f} / {scores['wer']:.1f}" if isinstance(scores, dict) else "-"


def project_paths(globals_file: Path = GLOBALS) -> dict[str, str]:
    import yaml

    return yaml.safe_load(globals_file.read_text())["paths"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--globals", type=Path, default=GLOBALS, help="the project's paths (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    paths = project_paths(args.globals)
    metrics = split_metrics(Path(paths["metrics"]))
    if not metrics:
        print(f"no evaluation results under {paths['metrics']}: run `dvc repro` first", file=sys.stderr)
        return 1
    print(results_table(metrics))
    open_test = open_test_table(metrics)
    if open_test is not None:
        print(f"\n{open_test}")
    print(
        f"\nCER / WER in %. The model: {paths['train']}/run (transcribe with `asr-pipeline transcribe --run-dir "
        f"{paths['train']}/run AUDIO`); every metric: `dvc metrics show`."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
