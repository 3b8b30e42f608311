"""The dataset splits every per-split stage handles (namespaces in Kedro, `foreach` items in DVC)."""

SPLITS = ("train", "dev", "test")
EVAL_SPLITS = ("dev", "test")
