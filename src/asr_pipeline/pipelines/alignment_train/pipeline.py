from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.alignment_train.nodes import train_iteration


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                train_iteration,
                inputs=[
                    "train.feature_shards",
                    "dev.feature_shards",
                    "length_index",
                    "tokenizer_model",
                    "alignment_dir",
                    "params:train",
                    "params:alignment",
                ],
                outputs=None,
                name="train_iteration",
            )
        ]
    )
