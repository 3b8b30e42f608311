from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.hubert_validate.nodes import validate_checkpoints


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                validate_checkpoints,
                inputs=["hubert_dir", "params:hubert"],
                outputs=None,
                name="validate_checkpoints",
            )
        ]
    )
