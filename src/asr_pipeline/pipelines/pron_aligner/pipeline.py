from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.pron_aligner.nodes import train_aligner


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                train_aligner,
                inputs=[
                    "train.manifest",
                    "dev.manifest",
                    "test.manifest",
                    "train.phones",
                    "dev.phones",
                    "test.phones",
                    "test.raw_manifest",
                    "tokenizer_model",
                    "params:features",
                    "params:tokenizer",
                    "params:train",
                    "params:pron",
                    "pron_dir",
                    "pron_demo_dir",
                ],
                outputs=None,
                name="train_aligner",
            )
        ]
    )
