"""The dataset splits every per-split stage handles (namespaces in Kedro, `foreach` items in DVC)."""

SPLITS = ("train", "dev", "test")
# The test split under each evaluation condition (params.yaml ``conditions``): split test_<condition>.
CONDITIONS = ("noisy", "reverb", "telephone", "codec", "fast", "slow")
CONDITION_SPLITS = tuple(f"test_{name}" for name in CONDITIONS)
EVAL_SPLITS = ("dev", "test", *CONDITION_SPLITS)
