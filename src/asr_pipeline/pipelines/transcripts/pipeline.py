from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.splits import SPLITS
from asr_pipeline.pipelines.transcripts.nodes import build_tokenizer_corpus, normalize_manifest


def create_pipeline(**kwargs) -> Pipeline:
    per_split = [
        Pipeline(
            [
                Node(
                    normalize_manifest,
                    inputs=["raw_manifest", "params:transcripts"],
                    outputs=["manifest", "transcripts_report"],
                    name="normalize_manifest",
                )
            ],
            namespace=split,
            parameters={"params:transcripts"},
        )
        for split in SPLITS
    ]
    corpus = Pipeline(
        [
            Node(
                build_tokenizer_corpus,
                inputs="train.manifest",
                outputs="tokenizer_corpus",
                name="build_tokenizer_corpus",
            )
        ]
    )
    return sum(per_split, corpus)
