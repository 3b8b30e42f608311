from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.finetune.nodes import finetune_run


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                finetune_run,
                inputs=[
                    "dev.manifest",
                    "test.manifest",
                    "tokenizer_model",
                    "params:features",
                    "params:tokenizer",
                    "params:train.model.architecture",
                    "params:conditions",
                    "params:train",
                    "params:finetune",
                    "finetune_dir",
                ],
                outputs=None,
                name="finetune_run",
            )
        ]
    )
