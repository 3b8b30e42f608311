from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.features.nodes import extract_features
from asr_pipeline.pipelines.splits import SPLITS


def create_pipeline(**kwargs) -> Pipeline:
    return sum(
        (
            Pipeline(
                [
                    Node(
                        extract_features,
                        inputs=[
                            "manifest",
                            "tokenizer_model",
                            "params:features",
                            "params:tokenizer",
                            "params:train.model.architecture",
                        ],
                        outputs=["feature_shards", "extraction_report"],
                        name="extract_features",
                    )
                ],
                namespace=split,
                inputs={"tokenizer_model"},
                parameters={"params:features", "params:tokenizer", "params:train.model.architecture"},
            )
            for split in SPLITS
        ),
        Pipeline([]),
    )
