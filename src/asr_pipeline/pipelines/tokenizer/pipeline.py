from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.tokenizer.nodes import build_decoding_lexicon, train_tokenizer


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                train_tokenizer,
                inputs=["tokenizer_corpus", "params:tokenizer", "params:transcripts.normalization"],
                outputs=["tokenizer_model", "tokenizer_vocab", "tokenizer_info"],
                name="train_tokenizer",
            ),
            Node(
                build_decoding_lexicon,
                inputs=["tokenizer_corpus", "tokenizer_model"],
                outputs=["lexicon", "lexicon_report"],
                name="build_decoding_lexicon",
            ),
        ]
    )
