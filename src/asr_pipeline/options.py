"""The one engine between plain params and typed config dataclasses.

A config field states every fact about itself once, with ``setting(...)``: its default, its help text,
its unit, the command-line flag and aliases that set it, and, where the reference trainer's default or
meaning differs from ours, the reference's. ``from_dict`` turns a params mapping (params.yaml, a saved
``training_config.json``, flags) into any config dataclass, nested sections, lists, literals and unions
included: unknown keys are named with what the section accepts, never ignored, and a value of the wrong
type names its dotted key. ``to_dict`` is the way back. ``walk`` lists a config's fields with their
dotted keys, so the CLI parser, the docs' flag table and the defaults table are generated from the fields.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import MISSING, dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")

# A field's metadata key holding its Setting.
SETTING = "setting"


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()  # Setting.reference of a field whose default the reference trainer shares


class ConfigError(ValueError):
    """A configuration value that cannot be used. The message is one line naming the file or flag, the key
    and what is allowed; commands and ``kedro run`` print it without a traceback (``asr_pipeline.errors``)."""


@dataclass(frozen=True)
class Setting:
    """What a config field says about itself beyond its type and default (``setting`` builds it).

    ``flag``: the command-line name that sets it ("--epochs"; None: ``--set section.key=VALUE`` only); a
    name without the leading dashes is relative, prefixed with the enclosing section's ``flag_prefix``
    (``validation.decoding``'s "--val-"). ``shown_default``: the default as --help states it when the
    value alone would mislead ("per architecture: ..."). ``reference``: the reference trainer's default
    where ours differs (``--defaults reference`` applies it), ``reference_note`` why ours differs or what
    the reference means by the flag. ``parse``: how a flag's text becomes the value (default: from the type).
    """

    help: str
    unit: str | None = None
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    shown_default: str | None = None
    const: Any = None  # a switch's value (bool fields; None: True)
    choices: Any = None  # a live sequence of allowed values (Literal fields need none: the type lists them)
    reference: Any = UNSET
    reference_note: str | None = None
    parse: Callable[[str], Any] | None = None
    flag_prefix: str | None = None  # nested sections: prefix of their fields' relative flags


def setting(
    default: Any = MISSING,
    *,
    help: str,
    default_factory: Callable[[], Any] | Any = MISSING,
    **facts: Any,
) -> Any:
    """A dataclass field whose help, unit, flag, aliases and reference default live with it (``Setting``)."""
    metadata = {SETTING: Setting(help=help, **facts)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def setting_of(field: dataclasses.Field) -> Setting | None:
    return field.metadata.get(SETTING)


def shared_setting(owner: type, name: str, default: Any = MISSING, **facts: Any) -> Any:
    """The field ``name`` of the config ``owner`` declared again in another config: its help, flag, unit and
    the rest of its ``Setting`` stated once, in ``owner``. ``default`` (unless given: ``owner``'s) and
    ``facts`` (``Setting`` fields, e.g. a ``shown_default``) are where the other config differs."""
    declared = next((field for field in dataclasses.fields(owner) if field.name == name), None)
    info = None if declared is None else setting_of(declared)
    if info is None:
        raise ValueError(f"{owner.__name__} has no field {name!r} declared with setting(...)")
    stated = {**{fact.name: getattr(info, fact.name) for fact in dataclasses.fields(info)}, **facts}
    if default is MISSING:
        return setting(declared.default, default_factory=declared.default_factory, **stated)
    return setting(default, **stated)


# --- dict -> dataclass ---------------------------------------------------------------------------------
def from_dict(cls: type[T], values: Mapping[str, Any] | None, section: str = "", what: str = "config") -> T:
    """``cls`` built from ``values``: nested dataclasses from nested mappings, every key known, every value
    of its field's type (an int is taken for a float), then the class's own checks. Raises ConfigError (a
    one-line ValueError) whose message starts with the dotted key, prefixed by ``section`` (the params.yaml
    key or "--config FILE", so a typo points at the line to fix); ``what`` names the whole in messages."""
    unknown = unknown_keys(cls, values or {}, f"{section}." if section else "")
    if unknown:
        raise ConfigError(f"unknown {what} keys: {', '.join(unknown)}")
    try:
        return _build(cls, values or {}, f"{section}." if section else "", what)
    except ConfigError:
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error)) from None


def options_from_dict(cls: type[T], values: Mapping[str, Any] | None, section: str) -> T:
    """``from_dict`` for a params.yaml section of options: the message lists the known options on a typo."""
    values = dict(values or {})
    known = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"{section}: unknown option(s) {unknown}; the known options are {known}")
    try:
        return _build(cls, values, f"{section}.")
    except ConfigError:
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error) if str(error).startswith(section) else f"{section}: {error}") from None


def to_dict(config: Any) -> dict[str, Any]:
    """The plain dict ``from_dict`` reads back to an equal config."""
    return dataclasses.asdict(config)


def unknown_keys(cls: type, values: Any, prefix: str) -> list[str]:
    """Every key of ``values`` (nested) that is no field of ``cls``, each with what its section accepts."""
    hints = _hints(cls)
    if not isinstance(values, Mapping) or hints is None:
        return []
    unknown = []
    for key, value in values.items():
        if key not in hints:
            accepted = ", ".join(f.name for f in dataclasses.fields(cls))
            unknown.append(f"{prefix}{key} (the {prefix.rstrip('.') or 'top'} section accepts: {accepted})")
        elif _dataclass_of(hints[key]) is not None:
            unknown.extend(unknown_keys(_dataclass_of(hints[key]), value, f"{prefix}{key}."))
    return unknown


def _dataclass_of(annotation: Any) -> type | None:
    """The dataclass an annotation names, alone or ``| None``; else None."""
    if dataclasses.is_dataclass(annotation):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        classes = [a for a in typing.get_args(annotation) if dataclasses.is_dataclass(a)]
        return classes[0] if len(classes) == 1 else None
    return None


def _build(cls: type, values: Any, prefix: str, what: str = "config") -> Any:
    where = prefix.rstrip(".") or f"the {what}"
    if isinstance(values, cls):
        return values
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where} must be a mapping of keys to values, got {type(values).__name__}")
    hints = _hints(cls)
    if hints is None:  # an annotation only importable under TYPE_CHECKING: the class checks itself
        return cls(**values)
    required = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is MISSING and f.default_factory is MISSING and f.init
    ]
    missing = [f"{prefix}{name}" for name in required if name not in values]
    if missing:
        raise ConfigError(f"missing required {what} keys: {', '.join(missing)}")
    kwargs, type_error = {}, None
    for name, value in values.items():
        try:
            kwargs[name] = coerce(hints[name], value, f"{prefix}{name}", what)
        except ConfigError as error:
            kwargs[name], type_error = value, type_error or error
    if type_error is not None:  # the class's own check, where it has one, says more than a type name
        try:
            cls(**kwargs)
        except ValueError as own:
            raise ConfigError(f"{where}: {own}") from None
        except Exception:  # a check that trips over the wrong type (TypeError, AttributeError)
            pass
        raise type_error
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{where}: {error}") from None


def _hints(cls: type) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):
        return None


def coerce(annotation: Any, value: Any, path: str, what: str = "config") -> Any:
    """``value`` checked against (and converted to) ``annotation``; ConfigError naming ``path`` if it is not."""
    if dataclasses.is_dataclass(annotation):
        return _build(annotation, value, f"{path}.", what)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return coerce(option, value, path, what)
            except ConfigError:
                continue
        raise ConfigError(f"{path}: expected {type_name(annotation)}, got {value!r}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{path}: expected one of {list(args)}, got {value!r}")
        return value
    # Free-form mappings (model.options): their keys are checked where they are used.
    if origin in (dict, Mapping, MutableMapping) or annotation is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        if len(args) == 2 and args[0] is int:  # JSON writes every mapping key as a string: "30" is 30
            value = {
                int(k) if isinstance(k, str) and k.lstrip("-").isdigit() else k: v for k, v in value.items()
            }
        if len(args) == 2:
            return {
                coerce(args[0], k, f"{path} key", what): coerce(args[1], v, f"{path}[{k!r}]", what)
                for k, v in value.items()
            }
        return dict(value)
    if (origin is tuple or annotation is tuple) and not isinstance(value, list | tuple):
        return value  # a range given as one number (augment.conditions): the class's own check decides
    if origin in (list, tuple, Sequence) or annotation in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ConfigError(f"{path}: expected {len(args)} values, got {value!r}")
            return tuple(
                coerce(a, item, f"{path}[{i}]", what)
                for i, (a, item) in enumerate(zip(args, value, strict=True))
            )
        item_type = args[0] if args else Any
        items = [coerce(item_type, item, f"{path}[{i}]", what) for i, item in enumerate(value)]
        return tuple(items) if origin is tuple or annotation is tuple else items
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if annotation is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if annotation is str and isinstance(value, str):
        return value
    if (
        isinstance(annotation, type)
        and annotation not in (bool, int, float, str)
        and isinstance(value, annotation)
    ):
        return value  # an object the caller built (a Path, an enum member)
    if not isinstance(annotation, type) or annotation in (bool, int, float, str):
        raise ConfigError(f"{path}: expected {type_name(annotation)}, got {value!r}")
    try:  # another class (Path, an enum): from the plain value
        return annotation(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: expected {type_name(annotation)}, got {value!r}") from None


def type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else type_name(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def parse_value(text: str) -> Any:
    """A command line's value as YAML, with the numbers YAML 1.1 leaves as text: ``5e-3`` is 0.005 (PyYAML
    reads only ``5.0e-3`` as a float), so ``--set optim.learning_rate=5e-3`` means what it says."""
    import yaml

    value = yaml.safe_load(text)
    if isinstance(value, str):
        try:
            return float(value) if any(c in value.lower() for c in ".e") else int(value)
        except ValueError:
            return value
    return value


# --- merging params -------------------------------------------------------------------------------------
def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` over it, nested mappings merged key by key (the config's one merge rule)."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def expand_dotted(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"optim.epochs": 3}`` -> ``{"optim": {"epochs": 3}}``, nested and plain keys alike (command lines
    and schedules write dotted keys)."""
    expanded: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            value = expand_dotted(value)
        head, _, rest = str(key).partition(".")
        if rest:
            value = expand_dotted({rest: value})
        expanded = deep_merge(expanded, {head: value})
    return expanded


# --- the fields of a config, for parsers and tables -----------------------------------------------------
@dataclass(frozen=True)
class ConfigField:
    """One leaf field of a config, where it sits and what it says about itself."""

    key: str  # dotted, e.g. "validation.decoding.beam_width"
    field: dataclasses.Field
    owner: type  # the dataclass declaring it
    annotation: Any
    setting: Setting | None
    flag_prefix: str  # the enclosing sections' flag prefix ("--val-" under validation.decoding)

    @property
    def default(self) -> Any:
        if self.field.default is not MISSING:
            return self.field.default
        if self.field.default_factory is not MISSING:
            return self.field.default_factory()
        return MISSING

    @property
    def flag(self) -> str | None:
        if self.setting is None or self.setting.flag is None:
            return None
        return absolute_flag(self.setting.flag, self.flag_prefix)

    @property
    def aliases(self) -> tuple[str, ...]:
        if self.setting is None:
            return ()
        return tuple(absolute_flag(alias, self.flag_prefix) for alias in self.setting.aliases)


def reference_values(cls: type) -> dict[str, Any]:
    """Dotted key -> the reference trainer's default, for every field of ``cls`` that states one."""
    return {
        field.key: field.setting.reference
        for field in walk(cls)
        if field.setting is not None and field.setting.reference is not UNSET
    }


def absolute_flag(name: str, prefix: str) -> str:
    return name if name.startswith("--") else f"{prefix or '--'}{name}"


def walk(cls: type, prefix: str = "", flag_prefix: str = "") -> Iterator[ConfigField]:
    """Every leaf field of ``cls``, nested sections expanded, in declaration order."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        annotation = hints[field.name]
        info = setting_of(field)
        nested = _dataclass_of(annotation)
        if nested is not None and typing.get_origin(annotation) is None:
            inner_prefix = info.flag_prefix if info is not None and info.flag_prefix else flag_prefix
            yield from walk(nested, f"{prefix}{field.name}.", inner_prefix)
        else:
            yield ConfigField(f"{prefix}{field.name}", field, cls, annotation, info, flag_prefix)


__all__ = [
    "UNSET",
    "ConfigError",
    "ConfigField",
    "Setting",
    "absolute_flag",
    "coerce",
    "deep_merge",
    "expand_dotted",
    "from_dict",
    "options_from_dict",
    "parse_value",
    "reference_values",
    "setting",
    "setting_of",
    "shared_setting",
    "to_dict",
    "type_name",
    "unknown_keys",
    "walk",
]
