"""One Kedro pipeline per DVC stage; ``__default__`` runs the corpus-to-evaluation stages in dependency order.

``__default__`` leaves out ``demo_corpus``: the demo is one optional source, written to its own folder
(``paths.demo``), and a plain ``kedro run`` must never synthesize it when ``paths.corpus`` names a user's
data. Build it explicitly with ``kedro run --pipelines=demo_corpus`` (``dvc repro`` does it for you); so is the
pronunciation demo set (``pron_corpus``).
The alignment recipe's pipelines (``alignment_align``, ``alignment_train``) and HuBERT's (``hubert_units``,
``hubert_pretrain``, ``hubert_validate``, ``hubert_abx``), ``finetune``, ``hf_finetune`` and ``pron_aligner`` are left out too: they run one iteration (or
entry) at a time from dvc.yaml's foreach stages.
"""

from __future__ import annotations

from kedro.framework.project import find_pipelines
from kedro.pipeline import Pipeline

OPTIONAL_PIPELINES = (
    "demo_corpus",
    "pron_corpus",
    "alignment_align",
    "alignment_train",
    "hubert_units",
    "hubert_pretrain",
    "hubert_validate",
    "hubert_abx",
    "finetune",
    "hf_finetune",
    "pron_aligner",
)


def register_pipelines() -> dict[str, Pipeline]:
    pipelines = find_pipelines(raise_errors=True)
    default = [pipeline for name, pipeline in pipelines.items() if name not in OPTIONAL_PIPELINES]
    pipelines["__default__"] = sum(default, Pipeline([]))
    return pipelines
