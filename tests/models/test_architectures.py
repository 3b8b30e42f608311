"""Each architecture's spec is torch-free and the one source of its names: --help, the config checks and
the features stage read it without importing torch, and it resolves every variant's config (the config class
and sizes live in the spec; the model file imports them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asr_pipeline.features.frontends import FRONTENDS, frontend_named
from asr_pipeline.models.registry import SPECS, architecture_names, get_spec


def test_the_registry_and_every_spec_import_no_torch():
    code = (
        "import sys, asr_pipeline.models.registry as r; r.architecture_names(); "
        "[r.get_spec(n).variants for n in r.architecture_names()]; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "False"


def test_the_config_checks_read_the_specs_without_torch():
    code = (
        "import sys\n"
        "from asr_pipeline.training.config import ModelConfig\n"
        "ModelConfig(architecture='zipformer', variant='tiny')\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "False"


def test_every_variant_of_every_spec_resolves_its_config_without_torch():
    code = (
        "import sys, asr_pipeline.models.registry as r\n"
        "for name in r.architecture_names():\n"
        "    spec = r.get_spec(name)\n"
        "    [spec.config_for(variant, {}) for variant in (None, *spec.variants)]\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_spec_names_a_registered_frontend_of_its_input_width(name):
    spec = get_spec(name)

    assert spec.frontend in FRONTENDS
    assert frontend_named(spec.frontend).feature_dim == spec.input_dim


def test_the_default_architecture_is_the_first_registered():
    assert architecture_names()[0] == "squeezeformer"
