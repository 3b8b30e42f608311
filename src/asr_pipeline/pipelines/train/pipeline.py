from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.train.nodes import train_model


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                train_model,
                inputs=[
                    "train.feature_shards",
                    "dev.feature_shards",
                    "length_index",
                    "tokenizer_model",
                    "training_run_dir",
                    "params:train",
                ],
                outputs=["training_metrics", "trained_model"],
                name="train_model",
            )
        ]
    )
