"""The torch-free names (models.architectures) agree with the registry's specs, and stay torch-free."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asr_pipeline.models import architectures
from asr_pipeline.models.registry import SPECS, get_spec


def test_the_buildable_architectures_are_exactly_the_registry_entries():
    assert tuple(SPECS) == architectures.AVAILABLE_ARCHITECTURES
    assert set(architectures.VARIANTS) == set(SPECS)
    assert architectures.DEFAULT_ARCHITECTURE in SPECS


@pytest.mark.parametrize("name", architectures.AVAILABLE_ARCHITECTURES)
def test_help_names_the_same_variants_and_frontend_as_the_spec(name):
    spec = get_spec(name)

    assert architectures.VARIANTS[name] == spec.variants
    assert architectures.frontend_of(name) == spec.frontend


def test_every_known_architecture_names_a_frontend():
    assert set(architectures.FRONTENDS) == set(architectures.ARCHITECTURES)


def test_the_names_module_imports_no_torch():
    code = "import sys, asr_pipeline.models.architectures; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("name", architectures.AVAILABLE_ARCHITECTURES)
def test_the_default_input_width_is_the_frontends_and_the_specs(name):
    from asr_pipeline.features.frontends import frontend_for

    assert architectures.default_input_dim(name) == frontend_for(name).feature_dim == get_spec(name).input_dim
