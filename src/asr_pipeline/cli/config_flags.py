"""Command-line flags generated from a config dataclass's fields (``asr_pipeline.options.setting``).

A field with a ``flag`` becomes one argparse option: its type, choices and metavar from the annotation, its
help and stated default from the field, its aliases from the field. Every generated option has no argparse
default (None), so an unset flag never overrides a ``--config`` file's value; ``given_overrides`` turns the
flags given into dotted config keys. ``--set section.key=VALUE`` reaches any field, flag or not, with VALUE
read as YAML.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Any, Literal

from asr_pipeline.options import ConfigField, parse_value, type_name, walk


@dataclass(frozen=True)
class ConfigFlag:
    """One generated option: ``flag`` (and ``aliases``) set config key ``key``."""

    flag: str
    key: str
    parse: Callable[[str], Any] | None  # None: a switch storing ``const``
    const: Any
    help: str
    choices: Any
    metavar: str | None
    aliases: tuple[str, ...]
    field: ConfigField

    @property
    def dest(self) -> str:
        return dest_of(self.flag)


def dest_of(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def config_flags(cls: type, prefix: str = "") -> list[ConfigFlag]:
    """The options of every field of ``cls`` (nested sections included) that names a flag, in field order;
    their keys start with ``prefix`` (``"model.options."``: a model config's fields)."""
    flags = []
    for field in walk(cls, prefix):
        if field.flag is None:
            continue
        info = field.setting
        parse, choices = _parser_of(field)
        flags.append(
            ConfigFlag(
                flag=field.flag,
                key=field.key,
                parse=parse,
                const=(True if info.const is None else info.const) if parse is None else None,
                help=info.help,
                choices=info.choices if info.choices is not None else choices,
                metavar=info.metavar,
                aliases=field.aliases,
                field=field,
            )
        )
    return flags


def add_config_flags(
    parser: argparse.ArgumentParser, flags: list[ConfigFlag], negatable: bool = False
) -> None:
    """Add ``flags`` to ``parser``; ``negatable``: a switch also has its ``--no-`` form (``--no-byte-fallback``)."""
    for spec in flags:
        shown = shown_default(spec.field)
        help_text = spec.help.replace("%", "%%") + ("" if shown is None else f" (default: {shown})")
        names = (spec.flag, *spec.aliases)
        if spec.parse is None and negatable:
            parser.add_argument(*names, dest=spec.dest, action=argparse.BooleanOptionalAction, help=help_text)
        elif (
            spec.parse is None
        ):  # store_const keeps the default None: an unset switch leaves the file's value
            parser.add_argument(
                *names, dest=spec.dest, action="store_const", const=spec.const, help=help_text
            )
        else:
            parser.add_argument(
                *names,
                dest=spec.dest,
                type=spec.parse,
                choices=spec.choices,
                metavar=spec.metavar,
                help=help_text,
            )


def shown_default(field: ConfigField) -> str | None:
    """The default --help and the docs state for ``field``; None when there is none to state."""
    if field.setting is not None and field.setting.shown_default is not None:
        return field.setting.shown_default
    default = field.default
    if _is_switch(field.annotation):  # switches are off unless given
        return None
    if default is MISSING or default is None or default is False:  # "is": a default of 0 is still shown
        return None
    if isinstance(default, list | tuple):
        return ",".join(map(str, default)) if default else None
    return str(default)


def given_overrides(args: argparse.Namespace, flags: list[ConfigFlag]) -> dict[str, tuple[Any, str]]:
    """``{key: (value, flag)}`` for every flag given on the command line."""
    return {
        spec.key: (getattr(args, spec.dest), spec.flag)
        for spec in flags
        if getattr(args, spec.dest, None) is not None
    }


def parse_assignment(text: str) -> tuple[str, Any]:
    """``"optim.epochs=3"`` -> ("optim.epochs", 3): ``--set``'s KEY=VALUE, the value read as YAML."""
    import yaml

    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as optim.epochs=3, got {text!r}")
    try:
        return key.strip(), parse_value(value)
    except yaml.YAMLError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: the value is not YAML ({error})") from None


# --- from an annotation to an argparse type ------------------------------------------------------------
def _is_switch(annotation: Any) -> bool:
    return _strip_none(annotation) is bool


def _strip_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _parser_of(field: ConfigField) -> tuple[Callable[[str], Any] | None, list | None]:
    """(text -> value, choices) for ``field``'s flag; parse None for a switch."""
    annotation = _strip_none(field.annotation)
    if field.setting.parse is not None:
        return _argparse_type(field.setting.parse, type_name(annotation)), None
    if annotation is bool:
        return None, None
    if typing.get_origin(annotation) is Literal:
        choices = list(typing.get_args(annotation))
        return type(choices[0]), choices
    if annotation in (int, float, str):
        return annotation, None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args and args[0] in (int, float, str):
        return _argparse_type(_comma_list(args[0]), f"list of {args[0].__name__}"), None
    if origin is dict and len(args) == 2 and all(a in (int, float, str) for a in args):
        return _argparse_type(_pairs(*args), f"mapping of {args[0].__name__} to {args[1].__name__}"), None
    raise TypeError(f"{field.key}: no flag parser for {type_name(field.annotation)}; give setting(parse=...)")


def _argparse_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """``parse`` whose ValueError argparse prints as the message itself (not "invalid value")."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = name
    return convert


def _comma_list(item: type) -> Callable[[str], list]:
    """``"3,5"`` -> [3, 5]."""

    def parse(text: str) -> list:
        try:
            return [item(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            raise ValueError(f"expected comma-separated {item.__name__} values, got {text!r}") from None

    return parse


def _pairs(key: type, value: type) -> Callable[[str], dict]:
    """``"30:1e-3,60:5e-4"`` -> {30: 0.001, 60: 0.0005}."""

    def parse(text: str) -> dict:
        pairs = {}
        for part in (part.strip() for part in text.split(",")):
            left, _, right = part.partition(":")
            try:
                pairs[key(left)] = value(right)
            except ValueError:
                raise ValueError(
                    f"expected KEY:VALUE pairs ({key.__name__}:{value.__name__}) such as 30:1e-3,60:5e-4, "
                    f"got {part!r} in {text!r}"
                ) from None
        return pairs

    return parse
