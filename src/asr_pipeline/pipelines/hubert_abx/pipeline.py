from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.hubert_abx.nodes import score_layers


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [Node(score_layers, inputs=["hubert_dir", "params:hubert"], outputs=None, name="score_layers")]
    )
