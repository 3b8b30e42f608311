"""Architecture + named variant -> config -> model, through one ``ArchitectureSpec`` per architecture. The
one place the CLI, the Kedro train node, the training worker and ``models.loading`` turn
``--architecture``/``--variant`` flags (or a saved config) into a model, and where ``--help`` and the config
checks read the architectures' names, sizes, frontends and recipes.

    config = model_config("squeezeformer", "xs", input_dim=80, vocab_size=257, dropout=0.0)
    model = build_model("squeezeformer", "demo", input_dim=80, vocab_size=257)

Overrides are config fields and win over the variant's numbers; ``None`` means "not given", so optional
command-line flags can be passed straight through. With no variant the model gets the architecture's
default sizes (``ArchitectureSpec.default_sizes``). Configs are frozen dataclasses of plain values:
``dataclasses.asdict`` -> JSON -> ``build_from_config`` rebuilds the same model from a run directory.

Importing this module imports no torch: the specs name their model code by import path (``models.spec``).

A new architecture is its own model file, a torch-free spec next to it, and one ``register(spec)`` call:
an entry in ``SPECS`` below for ours. For an architecture outside this package, list its module (which
calls ``register``), or ``module:NAME`` naming its spec, in the ``ASR_PIPELINE_SPEC_MODULES`` environment
variable (comma-separated): every process -- the CLI, the torchrun workers it starts, ``decode`` -- imports
them before it first looks up an architecture it does not know.

    ASR_PIPELINE_SPEC_MODULES=my_models.conformer_spec:CONFORMER asr-pipeline train --architecture conformer

Nothing outside ``models/`` branches on an architecture's name: it asks its spec.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from asr_pipeline.models.hubert_spec import HUBERT, HUBERT_PRETRAIN
from asr_pipeline.models.paraformer_spec import PARAFORMER
from asr_pipeline.models.spec import COMMON_FIELDS, ArchitectureSpec, OutputKind
from asr_pipeline.models.speech_aligner_spec import SPEECH_ALIGNER
from asr_pipeline.models.squeezeformer_spec import SQUEEZEFORMER
from asr_pipeline.models.w2v_bert_spec import W2V_BERT
from asr_pipeline.models.zipformer_spec import ZIPFORMER

if TYPE_CHECKING:
    from torch import nn

# name -> spec: the one registry, in the order --help lists them (the reference trainer's four
# architectures, then HuBERT's fine-tuning and pretraining models, then the pronunciation aligner).
SPECS: dict[str, ArchitectureSpec] = {
    spec.name: spec
    for spec in (SQUEEZEFORMER, ZIPFORMER, PARAFORMER, W2V_BERT, HUBERT, HUBERT_PRETRAIN, SPEECH_ALIGNER)
}
DEFAULT_ARCHITECTURE = SQUEEZEFORMER.name  # what model.architecture is when not given
# Modules (comma-separated) that register more architectures, or module:NAME naming a spec to register,
# imported before the first look-up of an unknown name.
SPEC_MODULES_ENV = "ASR_PIPELINE_SPEC_MODULES"
_loaded_spec_modules: set[str] = set()


def register(spec: ArchitectureSpec) -> ArchitectureSpec:
    """Add ``spec`` to the registry under its (lower-case) name; a ValueError if the name is taken by
    another spec. Returns ``spec``, so a spec module can write ``TOY = register(ArchitectureSpec(...))``."""
    if spec.name != spec.name.lower():
        raise ValueError(f"architecture names are lower case: {spec.name!r}")
    if SPECS.get(spec.name, spec) is not spec:
        raise ValueError(f"architecture {spec.name!r} is already registered")
    SPECS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove the architecture ``name`` (a test's, or a plug-in's) from the registry; nothing if absent."""
    SPECS.pop(name.lower(), None)


def load_spec_modules() -> None:
    """Import each module named in ``ASR_PIPELINE_SPEC_MODULES`` (once per process): a plain module
    ``register``s its architectures itself; ``module:NAME`` registers the module's spec ``NAME``. An error
    names the variable."""
    for entry in filter(None, (part.strip() for part in os.environ.get(SPEC_MODULES_ENV, "").split(","))):
        if entry in _loaded_spec_modules:
            continue
        module, _, attribute = entry.partition(":")
        _loaded_spec_modules.add(entry)  # first: a module whose imports look an architecture up loads once
        try:
            loaded = importlib.import_module(module)
        except ImportError as error:
            _loaded_spec_modules.discard(entry)
            raise ValueError(f"{SPEC_MODULES_ENV}: cannot import {module!r} ({error})") from None
        if attribute:
            spec = getattr(loaded, attribute, None)
            if not isinstance(spec, ArchitectureSpec):
                _loaded_spec_modules.discard(entry)
                raise ValueError(f"{SPEC_MODULES_ENV}: {entry!r} names no ArchitectureSpec")
            register(spec)


def architecture_names() -> tuple[str, ...]:
    """Every registered architecture's name, in registration order."""
    load_spec_modules()
    return tuple(SPECS)


class RegisteredArchitectures(Sequence[str]):
    """The registered architectures' names, read on every use: argparse ``choices`` that accept an
    architecture registered after the parser was built (a test's, or a plug-in's)."""

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        return architecture_names()[index]

    def __len__(self) -> int:
        return len(architecture_names())

    def __iter__(self) -> Iterator[str]:
        return iter(architecture_names())

    def __contains__(self, name: object) -> bool:
        return name in architecture_names()


REGISTERED_ARCHITECTURES = RegisteredArchitectures()


def get_spec(architecture: str) -> ArchitectureSpec:
    """The spec of ``architecture``; a ValueError naming the known ones otherwise."""
    name = architecture.lower()
    if name not in SPECS:
        load_spec_modules()
    if name not in SPECS:
        raise ValueError(f"unknown architecture {architecture!r}; choose one of: {', '.join(SPECS)}")
    return SPECS[name]


def check_available(architecture: str) -> str:
    """``architecture`` lower-cased; a ValueError listing the known names when it is none of them."""
    return get_spec(architecture).name


def frontend_of(architecture: str) -> str:
    """The frontend name (``features.frontends``) of the features ``architecture`` eats."""
    return get_spec(architecture).frontend


def default_input_dim(architecture: str) -> int:
    """The feature width F ``architecture``'s frontend gives with its default settings (data.input_dim)."""
    return get_spec(architecture).input_dim


def check_variant(architecture: str, variant: str | None) -> str | None:
    """``variant`` lower-cased (None: the default sizes); a ValueError naming the sizes it can be."""
    spec = get_spec(architecture)
    if variant is None:
        return None
    if variant.lower() not in spec.variants:
        raise ValueError(
            f"unknown {architecture} variant {variant!r}; choose one of: {', '.join(spec.variants)} "
            f"(or none for {spec.default_sizes})"
        )
    return variant.lower()


def check_options(architecture: str, options: Mapping[str, object]) -> None:
    """A ValueError naming every key of ``options`` that is not an architecture-specific config field."""
    spec = get_spec(architecture)
    unknown = sorted(set(options) - set(spec.option_fields))
    if unknown:
        common = sorted(set(unknown) & set(COMMON_FIELDS))
        hint = f" ({', '.join(common)}: set model.<field> itself, not in options)" if common else ""
        raise ValueError(
            f"unknown {spec.name} option(s) {', '.join(unknown)}{hint}; model.options accepts: "
            f"{', '.join(spec.option_fields)}"
        )


def list_variants(architecture: str) -> list[str]:
    """Named sizes, in the spec's order (Squeezeformer: smallest paper size first, then the CPU sizes)."""
    return list(get_spec(architecture).variants)


def model_config(
    architecture: str,
    variant: str | None = None,
    *,
    input_dim: int,
    vocab_size: int,
    base: Mapping[str, object] | None = None,
    **overrides: object,
) -> Any:
    """The resolved config of ``variant`` (None: the default sizes) with ``overrides`` (config fields;
    None values mean "not given") over ``base`` (config fields taken as they are, None included: e.g. a
    pretrained model's config, ``models.loading.pretrained_values``)."""
    spec = get_spec(architecture)
    variant = check_variant(architecture, variant)
    given = {**(base or {}), **{key: value for key, value in overrides.items() if value is not None}}
    unknown = sorted(set(given) - set(spec.fields))
    if unknown:
        raise ValueError(
            f"unknown {spec.name} config field(s) {', '.join(unknown)}; valid fields: "
            f"{', '.join(sorted(spec.fields))}"
        )
    return spec.config_for(variant, {**given, "input_dim": input_dim, "vocab_size": vocab_size})


def build_model(
    architecture: str, variant: str | None = None, *, input_dim: int, vocab_size: int, **overrides: object
) -> nn.Module:
    config = model_config(architecture, variant, input_dim=input_dim, vocab_size=vocab_size, **overrides)
    return get_spec(architecture).builder(config)


def config_from_dict(architecture: str, values: Mapping[str, object]) -> Any:
    """Inverse of ``dataclasses.asdict``: a saved config (e.g. from a checkpoint) exactly as it was.

    Prefer this to passing the saved dict to ``build_model`` as overrides: there ``None`` means "not
    given", so a saved ``time_recover_idx=None`` would fall back to the variant's value. Lists (JSON has
    no tuples) come back as tuples where the config's default is one.
    """
    spec = get_spec(architecture)
    unknown = sorted(set(values) - set(spec.fields))
    if unknown:
        raise ValueError(f"saved {spec.name} config has unknown field(s) {', '.join(unknown)}")
    defaults = {f.name: f.default for f in dataclasses.fields(spec.config_type)}
    restored = {
        key: tuple(value) if isinstance(value, list) and isinstance(defaults.get(key), tuple) else value
        for key, value in values.items()
    }
    return spec.config_type(**restored)


def build_from_config(architecture: str, config: object) -> nn.Module:
    """The model of a resolved (or saved, as a dict) config, with no variant lookup."""
    spec = get_spec(architecture)
    if not isinstance(config, spec.config_type):
        config = config_from_dict(architecture, config)  # type: ignore[arg-type]
    return spec.builder(config)


def variant_peak_lr(architecture: str, variant: str | None) -> float | None:
    """The peak learning rate the paper trained this size with; None for no variant (the default sizes
    have no published peak)."""
    return get_spec(architecture).variant_peak_lr(check_variant(architecture, variant))


def peak_learning_rate(architecture: str, variant: str | None) -> float:
    """The architecture's recipe peak learning rate for ``variant``."""
    return get_spec(architecture).peak_learning_rate(check_variant(architecture, variant))


__all__ = [
    "COMMON_FIELDS",
    "DEFAULT_ARCHITECTURE",
    "REGISTERED_ARCHITECTURES",
    "SPECS",
    "SPEC_MODULES_ENV",
    "ArchitectureSpec",
    "OutputKind",
    "architecture_names",
    "build_from_config",
    "build_model",
    "check_available",
    "check_options",
    "check_variant",
    "config_from_dict",
    "default_input_dim",
    "frontend_of",
    "get_spec",
    "list_variants",
    "load_spec_modules",
    "model_config",
    "peak_learning_rate",
    "register",
    "unregister",
    "variant_peak_lr",
]
