from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.hubert_units.nodes import make_units


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                make_units,
                inputs=["train.manifest", "dev.manifest", "hubert_dir", "params:hubert"],
                outputs=None,
                name="make_units",
            )
        ]
    )
