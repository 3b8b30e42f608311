from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.hubert_pretrain.nodes import pretrain


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                pretrain,
                inputs=["hubert_dir", "tokenizer_model", "params:hubert"],
                outputs=None,
                name="pretrain",
            )
        ]
    )
