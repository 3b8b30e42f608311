"""training.config.run: ``run.compile`` reads a switch or a mode name, ``run.compile_options`` inductor settings; the run section refuses device choices
that cannot work and an upload without a repository; validation refuses an LM its decoder would not fuse."""

from __future__ import annotations

import re

import pytest

from asr_pipeline.decoding.options import DecodingOptions
from asr_pipeline.training.config.run import RunConfig, ValidationConfig, compile_mode, inductor_options


@pytest.mark.parametrize(
    ("value", "mode"),
    [(True, "default"), (False, "off"), ("on", "default"), ("No", "off"), (" max-autotune ", "max-autotune")],
)
def test_compile_takes_a_switch_or_a_mode_name(value, mode):
    assert compile_mode(value) == mode
    assert RunConfig(compile=value).compile == mode, "the config holds the mode name"


def test_an_unknown_compile_mode_lists_the_modes():
    with pytest.raises(
        ValueError, match=r"run.compile: expected one of off, default, .* \(or true/false\), got 'fast'"
    ):
        compile_mode("fast")


def test_compile_options_read_as_inductor_settings_with_literal_values():
    assert inductor_options(None) == inductor_options("") == {}
    assert inductor_options("combo_kernels=True, max_fusion_size=128,triton.cudagraphs=False") == {
        "combo_kernels": True,
        "max_fusion_size": 128,
        "triton.cudagraphs": False,
    }
    assert inductor_options("cpp.simdlen=None") == {"cpp.simdlen": None}


@pytest.mark.parametrize(
    ("text", "item"),
    [("combo_kernels", "combo_kernels"), ("max_fusion_size=8, nosuch=1", "nosuch=1"), ("x=1,,", "x=1")],
)
def test_a_compile_option_that_is_no_inductor_setting_is_refused_naming_it(text, item):
    with pytest.raises(ValueError, match=re.escape("run.compile_options: expected KEY=VALUE pairs")) as error:
        inductor_options(text)
    assert str(error.value).endswith(f"got {item!r}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "combo_kernels=false",
            "combo_kernels takes a value of type bool (its default is False), got 'false'",
        ),
        ("max_fusion_size=12x", "max_fusion_size takes a value of type int (its default is 64), got '12x'"),
        ("combo_kernels=1", "combo_kernels takes a value of type bool"),
    ],
)
def test_a_compile_option_of_another_type_than_the_settings_is_refused(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        inductor_options(text)


def test_a_run_config_refuses_a_compile_option_inductor_does_not_have():
    with pytest.raises(ValueError, match=re.escape("got 'combo_kernel=True'")):
        RunConfig(compile="default", compile_options="combo_kernel=True")
    assert RunConfig(compile_backend="aot_eager", compile_options="combo_kernels=True").compile_options


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"hf_upload_checkpoints": True},
            r"hf_upload_checkpoints needs hf_upload_repo_id \(--hf-upload-repo-id",
        ),
        ({"log_every": 0}, r"log_every must be > 0"),
        ({"max_non_finite_losses": -1}, r"max_non_finite_losses must be >= 0"),
        ({"backend": "cuda", "device_indices": [0, -1]}, r"device_indices must be >= 0"),
        ({"backend": "cuda", "device_indices": [1, 1]}, r"names a GPU twice"),
        ({"device_index": 1}, r"choose CUDA devices, but backend is 'cpu': set backend 'cuda'"),
        ({"backend": "cuda", "device_index": 1, "device_indices": [0, 2]}, r"are both set; give one GPU"),
    ],
)
def test_the_run_section_refuses_what_cannot_work_naming_the_fix(fields, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**fields)


def test_cuda_devices_are_accepted_on_the_cuda_backend():
    assert RunConfig(backend="cuda", device_indices=[0, 1]).device_indices == [0, 1]


def test_validation_refuses_an_lm_the_greedy_decoder_would_not_fuse():
    with pytest.raises(
        ValueError, match=r"lm_path is set but the greedy decoder fuses no LM; set .*--val-decoder"
    ):
        ValidationConfig(lm_path="lm.arpa")
    assert ValidationConfig(
        lm_path="lm.arpa", decoding=DecodingOptions(decoder="prefix_beam")
    ).uses_beam_search
    assert not ValidationConfig().uses_beam_search
