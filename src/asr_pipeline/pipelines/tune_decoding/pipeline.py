from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.tune_decoding.nodes import tune_decoding


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                tune_decoding,
                inputs=[
                    "trained_model",
                    "dev.feature_shards",
                    "tokenizer_model",
                    "lexicon_file",
                    "word_lm_file",
                    "token_lm_file",
                    "params:decoding",
                ],
                outputs=["tuned_decoding", "tuning_report"],
                name="tune_decoding",
            )
        ]
    )
