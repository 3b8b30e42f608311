"""params.yaml < conf/<env>/parameters* < --params, and DVC-tracked params are what Kedro runs with."""

from pathlib import Path

import pytest
import yaml
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from asr_pipeline.config_loader import ParamsYamlConfigLoader, read_params_file
from asr_pipeline.options import ConfigError
from tests.conftest import PROJECT_ROOT


def _project(tmp_path: Path, params: dict, env_params: dict | None = None) -> Path:
    (tmp_path / "conf" / "base").mkdir(parents=True)
    (tmp_path / "conf" / "local").mkdir()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    if env_params is not None:
        (tmp_path / "conf" / "local" / "parameters.yml").write_text(yaml.safe_dump(env_params))
    return tmp_path / "conf"


def test_params_yaml_is_the_base_and_env_overrides_softly(tmp_path):
    conf = _project(
        tmp_path,
        {"features": {"shard_size": 8, "fbank": {"num_mel_bins": 80}}},
        {"features": {"fbank": {"num_mel_bins": 40}}},
    )
    params = ParamsYamlConfigLoader(str(conf), env="local", merge_strategy={"parameters": "soft"})[
        "parameters"
    ]
    assert params == {"features": {"shard_size": 8, "fbank": {"num_mel_bins": 40}}}


def test_base_env_ignores_conf_local(tmp_path):
    conf = _project(tmp_path, {"lm": {"order": 3}}, {"lm": {"order": 5}})
    params = ParamsYamlConfigLoader(str(conf), env="base", base_env="base")["parameters"]
    assert params == {"lm": {"order": 3}}


def test_project_session_reads_params_yaml_and_runtime_params_win():
    bootstrap_project(PROJECT_ROOT)
    expected = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    with KedroSession.create(
        project_path=PROJECT_ROOT, env="base", runtime_params={"lm": {"order": 4}}
    ) as session:
        params = session.load_context().params
    assert params["features"] == expected["features"]
    assert params["lm"]["order"] == 4


def test_a_params_yaml_that_is_not_yaml_is_one_line_naming_the_file_and_line(tmp_path):
    conf = _project(tmp_path, {})
    (tmp_path / "params.yaml").write_text("features:\n  shard_size: 8\n  fbank: {num_mel_bins: 80\n")

    with pytest.raises(ConfigError) as error:
        ParamsYamlConfigLoader(str(conf), env="local")["parameters"]

    assert str(error.value).startswith(f"{(tmp_path / 'params.yaml').resolve()}:4: not valid YAML (")
    assert "\n" not in str(error.value)


def test_a_named_parameters_file_is_read_or_refused_in_one_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("conditions: {seed: 3}\n")
    assert read_params_file(path) == {"conditions": {"seed": 3}}
    with pytest.raises(ConfigError, match=r"missing\.yaml: no such parameters file"):
        read_params_file(tmp_path / "missing.yaml")
    path.write_text("- a list\n")
    with pytest.raises(ConfigError, match=r"params\.yaml: expected a mapping of stage name -> parameters"):
        read_params_file(path)
