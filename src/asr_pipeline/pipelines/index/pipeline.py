from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.index.nodes import index_feature_shards


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                index_feature_shards,
                inputs=["train.feature_shards", "dev.feature_shards"],
                outputs="length_index",
                name="index_feature_shards",
            ),
        ]
    )
