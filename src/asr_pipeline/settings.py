"""Kedro project settings: params.yaml is the parameter source (see config_loader.py)."""

from asr_pipeline.config_loader import ParamsYamlConfigLoader
from asr_pipeline.hooks import OneLineErrors

HOOKS = (OneLineErrors(),)  # our config/input errors end a run with one line (hooks.py)

CONFIG_LOADER_CLASS = ParamsYamlConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "merge_strategy": {"parameters": "soft"},
}
