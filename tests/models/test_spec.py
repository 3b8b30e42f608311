"""models.spec: a spec names model code by import path and imports it on first use; option fields are the config
fields beyond the common ones; a named size gives its config fields with the overrides over them; narrowing
keeps the head width and scales the head count; output kinds say whether they give frame posteriors."""

from __future__ import annotations

import dataclasses

import pytest

from asr_pipeline.models.spec import (
    FRAME_POSTERIOR_OUTPUTS,
    ArchitectureSpec,
    Lazy,
    check_input_normalization,
    has_frame_posteriors,
    narrow_by_heads,
    narrowed_heads,
    sized_config,
)
from asr_pipeline.options import setting


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    input_dim: int = 80
    vocab_size: int = 10
    dropout: float = 0.1
    d_model: int = 256
    num_heads: int = 4
    ff_dim: int | None = 1024
    kernel: int = 15
    extra: int | None = None


def test_a_lazy_path_imports_on_use_and_a_path_without_attribute_is_refused():
    join = Lazy("os.path:join")

    assert join("a", "b") == "a/b"
    with pytest.raises(
        ValueError, match=r"'os.path' is not an import path of the form 'package.module:attribute'"
    ):
        Lazy("os.path").resolve()


def toy_spec(config_class) -> ArchitectureSpec:
    """A spec of ``config_class`` whose code fields name builtins by import path."""
    return ArchitectureSpec(
        name="toy",
        config_class=config_class,
        variants=(),
        config_for="builtins:dict",
        builder="builtins:repr",
        peak_learning_rate="builtins:float",
        frontend="fbank",
        input_dim=80,
        output="ctc",
    )


def test_a_specs_code_fields_given_as_paths_become_lazy_and_its_option_fields_exclude_the_common_ones():
    spec = toy_spec(config_class=f"{__name__}:ToyConfig")

    assert isinstance(spec.builder, Lazy) and spec.builder(1) == "1"
    assert spec.config_type is ToyConfig
    assert spec.option_fields == ("ff_dim", "kernel", "extra")


@dataclasses.dataclass(frozen=True)
class ToyWithReferenceConfig(ToyConfig):
    form: str = setting(
        "ours", help="which form", reference="theirs", reference_note="theirs is another function"
    )


def test_a_specs_reference_options_are_its_config_fields_reference_defaults_unless_it_lists_them():
    spec = toy_spec(config_class=ToyWithReferenceConfig)

    assert spec.reference_options == {"form": ("theirs", "theirs is another function")}
    listed = dataclasses.replace(spec, reference_options={"form": ("listed", "the spec says so")})
    assert listed.reference_options == {"form": ("listed", "the spec says so")}


@pytest.mark.parametrize(
    ("heads", "fraction", "narrowed"), [(4, 0.5, 2), (4, 0.1, 1), (8, 0.3, 2), (6, 0.75, 4)]
)
def test_the_narrowed_head_count_is_rounded_and_at_least_one(heads, fraction, narrowed):
    assert narrowed_heads(heads, fraction) == narrowed


def test_narrowing_keeps_the_head_width_and_scales_the_set_fields_named():
    narrow = narrow_by_heads(ToyConfig(), 0.5, scaled=("ff_dim", "extra"))

    # 4 heads of 64 -> 2 heads of 64; ff_dim scaled by 2/4; extra unset stays unset; kernel not named
    assert (narrow.d_model, narrow.num_heads, narrow.ff_dim, narrow.extra, narrow.kernel) == (
        128,
        2,
        512,
        None,
        15,
    )


def test_ctc_gives_frame_posteriors_and_the_decoder_outputs_do_not():
    assert FRAME_POSTERIOR_OUTPUTS == ("ctc",)
    assert has_frame_posteriors("ctc") and not has_frame_posteriors("paraformer")


def test_a_configs_input_normalization_is_utterance_cmvn_or_nothing():
    check_input_normalization("utterance")
    check_input_normalization(None)
    with pytest.raises(ValueError, match="input_normalization must be 'utterance' or None, got 'global'"):
        check_input_normalization("global")


@dataclasses.dataclass(frozen=True)
class ToySize:
    d_model: int
    num_heads: int
    published_peak_lr: float  # describes the size; not a config field


def test_a_named_size_gives_its_config_fields_and_the_overrides_win_over_them():
    sizes = {"small": ToySize(128, 2, 1e-3), "wide": {"d_model": 512, "kernel": 31}}

    small = sized_config(ToyConfig, sizes, "small", {"num_heads": 8}, "toy size")
    wide = sized_config(ToyConfig, sizes, "wide", {}, "toy size")

    # small: d_model from the size, num_heads overridden, published_peak_lr left out; the rest the defaults
    assert (small.d_model, small.num_heads, small.kernel) == (128, 8, 15)
    assert (wide.d_model, wide.num_heads, wide.kernel) == (512, 4, 31)
    with pytest.raises(ValueError, match=r"^unknown toy size 'huge'; choose one of: small, wide$"):
        sized_config(ToyConfig, sizes, "huge", {}, "toy size")
