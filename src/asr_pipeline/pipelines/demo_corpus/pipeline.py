from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.demo_corpus.nodes import synthesize_demo_corpus


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                synthesize_demo_corpus,
                inputs="params:demo_corpus",
                outputs="demo_corpus_files",
                name="synthesize_demo_corpus",
            )
        ]
    )
