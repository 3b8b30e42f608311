from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.tokenizer.nodes import train_tokenizer


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                train_tokenizer,
                inputs=["tokenizer_corpus", "params:tokenizer", "params:transcripts.normalization"],
                outputs=["tokenizer_model", "tokenizer_vocab", "tokenizer_info"],
                name="train_tokenizer",
            )
        ]
    )
