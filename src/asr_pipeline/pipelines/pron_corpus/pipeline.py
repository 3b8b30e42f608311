from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.pron_corpus.nodes import synthesize_pron_demo_set


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                synthesize_pron_demo_set,
                inputs="params:pron.demo",
                outputs="pron_demo_files",
                name="synthesize_pron_demo_set",
            )
        ]
    )
