"""Kedro's config loader, taught that ``params.yaml`` at the project root is the parameter source.

DVC tracks parameters per stage from ``params.yaml`` (``params: [features]`` in dvc.yaml), so that file
must hold the values the pipeline runs with. Precedence, lowest first:
``params.yaml`` < ``conf/<env>/parameters*`` < ``kedro run --params`` (applied by the Kedro context).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kedro.config import MissingConfigException, OmegaConfigLoader
from omegaconf import OmegaConf

from asr_pipeline.options import ConfigError

PARAMS_FILE = "params.yaml"


class ParamsYamlConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader`` whose ``parameters`` start from ``<project>/params.yaml``."""

    def __getitem__(self, key: str) -> dict[str, Any]:
        if key != "parameters" or key in self:
            return super().__getitem__(key)
        try:
            conf_parameters = super().__getitem__(key)
        except MissingConfigException:
            conf_parameters = {}
        # Runtime params were already merged into conf_parameters when conf files exist; merging them
        # again last keeps `--params` on top when params.yaml is the only parameter file.
        merged = OmegaConf.merge(
            OmegaConf.create(load_params_yaml(self.conf_source)), conf_parameters, self.runtime_params or {}
        )
        return OmegaConf.to_container(merged, resolve=True)  # type: ignore[return-value]


def load_params_yaml(conf_source: str | Path) -> dict[str, Any]:
    """Read ``params.yaml`` next to the ``conf/`` folder; a missing file is an empty mapping."""
    path = Path(conf_source).resolve().parent / PARAMS_FILE
    return read_params_file(path) if path.is_file() else {}


def read_params_file(path: str | Path) -> dict[str, Any]:
    """A params.yaml-style file's mapping; a missing file, invalid YAML or another top level: one-line errors."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such parameters file")
    with path.open(encoding="utf-8") as handle:
        try:
            data = yaml.safe_load(handle) or {}
        except yaml.YAMLError as error:  # one line: where, and what the parser expected
            mark = getattr(error, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
            raise ConfigError(f"{where}: not valid YAML ({problem}); fix that line") from error
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of stage name -> parameters, got {type(data).__name__}"
        )
    return data
