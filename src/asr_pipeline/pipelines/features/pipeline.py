from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.features.nodes import extract_features, extract_optional_features
from asr_pipeline.pipelines.splits import OPTIONAL_SPLITS, SPLITS

SHARED = ["tokenizer_model", "params:features", "params:tokenizer", "params:train.model.architecture"]


def create_pipeline(**kwargs) -> Pipeline:
    """One namespace per split; the train split alone gets params.yaml ``augmentation``; an optional split
    (the open test set) may be empty."""
    return sum(
        (
            Pipeline(
                [
                    Node(
                        extract_optional_features if split in OPTIONAL_SPLITS else extract_features,
                        inputs=["manifest", *SHARED, *(["params:augmentation"] if split == "train" else [])],
                        outputs=["feature_shards", "extraction_report"],
                        name="extract_features",
                    )
                ],
                namespace=split,
                inputs={"tokenizer_model"},
                parameters={*SHARED[1:], *(["params:augmentation"] if split == "train" else [])},
            )
            for split in SPLITS
        ),
        Pipeline([]),
    )
