"""settings: Kedro runs this project with params.yaml's config loader (parameters merged softly, base env
``base``) and the one-line-errors hook."""

from __future__ import annotations

from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from asr_pipeline.config_loader import ParamsYamlConfigLoader
from asr_pipeline.hooks import OneLineErrors
from tests.conftest import PROJECT_ROOT


def test_kedro_takes_the_projects_config_loader_and_hooks():
    bootstrap_project(PROJECT_ROOT)
    from kedro.framework.project import settings

    assert settings.CONFIG_LOADER_CLASS is ParamsYamlConfigLoader
    assert settings.CONFIG_LOADER_ARGS["merge_strategy"] == {"parameters": "soft"}
    assert settings.CONFIG_LOADER_ARGS["base_env"] == "base"
    assert [type(hook) for hook in settings.HOOKS] == [OneLineErrors]
    with KedroSession.create(project_path=PROJECT_ROOT, env="base") as session:
        assert isinstance(session.load_context().config_loader, ParamsYamlConfigLoader)
