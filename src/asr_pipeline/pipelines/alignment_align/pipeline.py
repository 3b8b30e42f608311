from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.alignment_align.nodes import align_iteration


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                align_iteration,
                inputs=["train.feature_shards", "alignment_dir", "params:train", "params:alignment"],
                outputs=None,
                name="align_iteration",
            )
        ]
    )
