from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.evaluate.nodes import evaluate_split
from asr_pipeline.pipelines.splits import EVAL_SPLITS


def create_pipeline(**kwargs) -> Pipeline:
    """One namespace per split, so DVC's foreach runs ``--namespaces=<split>`` alone."""
    return sum(
        (
            Pipeline(
                [
                    Node(
                        evaluate_split,
                        inputs=[
                            "trained_model",
                            "feature_shards",
                            "tokenizer_model",
                            "lexicon_file",
                            "word_lm_file",
                            "token_lm_file",
                            "tuned_decoding",
                            "params:decoding",
                        ],
                        outputs=["hypotheses", "evaluation_metrics"],
                        name="evaluate_split",
                    )
                ],
                namespace=split,
                inputs={
                    "trained_model",
                    "tokenizer_model",
                    "lexicon_file",
                    "word_lm_file",
                    "token_lm_file",
                    "tuned_decoding",
                },
                parameters={"params:decoding"},
            )
            for split in EVAL_SPLITS
        ),
        Pipeline([]),
    )
