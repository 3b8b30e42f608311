"""The dataset splits every per-split stage handles (namespaces in Kedro, `foreach` items in DVC)."""

# test_open: the open test set (sentences written apart from the training text), optional for a corpus
# (conf/base/globals.yml paths.raw_test_open: null makes it an empty split that every stage passes through).
SPLITS = ("train", "dev", "test", "test_open")
OPTIONAL_SPLITS = ("test_open",)
# The test split under each evaluation condition (params.yaml ``conditions``): split test_<condition>.
CONDITIONS = ("noisy", "reverb", "telephone", "codec", "fast", "slow")
CONDITION_SPLITS = tuple(f"test_{name}" for name in CONDITIONS)
EVAL_SPLITS = ("dev", "test", "test_open", *CONDITION_SPLITS)
