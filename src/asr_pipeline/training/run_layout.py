"""File names inside a run directory, shared by the worker, the Kedro train node and the CLI.

Kept free of heavy imports so ``asr-pipeline --help`` and the Kedro node can name them cheaply.
"""

CONFIG_FILE = "training_config.json"  # the resolved TrainConfig, written before training starts
METRICS_FILE = "metrics.json"  # final metrics, written last by rank 0
TOKENIZER_FILE = "tokenizer.model"  # the SentencePiece model the run was trained with
INDEX_FILE = "length_index.parquet"  # the length index the run batched with
