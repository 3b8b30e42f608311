from functools import partial, update_wrapper

from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.conditions.nodes import extract_condition_features
from asr_pipeline.pipelines.features.pipeline import SHARED
from asr_pipeline.pipelines.splits import CONDITIONS


def create_pipeline(**kwargs) -> Pipeline:
    """The test split under each evaluation condition: namespace test_<condition>, reading test's manifest."""
    pipelines = []
    for name in CONDITIONS:
        node_function = update_wrapper(
            partial(extract_condition_features, name=name), extract_condition_features
        )
        node = Node(
            node_function,
            inputs=["manifest", *SHARED, f"params:conditions.{name}", "params:conditions.seed"],
            outputs=["feature_shards", "extraction_report"],
            name="extract_condition_features",
        )
        pipelines.append(
            Pipeline(
                [node],
                namespace=f"test_{name}",
                inputs={"manifest": "test.manifest", "tokenizer_model": "tokenizer_model"},
                parameters={*SHARED[1:], f"params:conditions.{name}", "params:conditions.seed"},
            )
        )
    return sum(pipelines, Pipeline([]))
