from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.hf_finetune.nodes import hf_finetune_run


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                hf_finetune_run,
                inputs=["params:hf_finetune", "params:conditions", "hf_finetune_dir"],
                outputs=None,
                name="hf_finetune_run",
            )
        ]
    )
