from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.lm.nodes import train_language_model, train_piece_language_model


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                train_language_model,
                inputs=["tokenizer_corpus", "params:lm"],
                outputs=["lm_arpa", "lm_binary"],
                name="train_language_model",
            ),
            Node(
                train_piece_language_model,
                inputs=["tokenizer_corpus", "tokenizer_model", "params:lm"],
                outputs="token_lm_binary",
                name="train_piece_language_model",
            ),
        ]
    )
