from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.pron_phones.nodes import transcribe_to_phones


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                transcribe_to_phones,
                inputs=["train.manifest", "dev.manifest", "test.manifest", "params:pron"],
                outputs=["train.phones", "dev.phones", "test.phones", "pron_g2p_report"],
                name="transcribe_to_phones",
            )
        ]
    )
