"""Settings written once: a dataclass field's type, default and metadata make its command-line flag.

A settings dataclass (``TrainConfig``, ``RunRequest``, ...) declares each field with ``setting(...)``:
its help text, its flag's spelling (default ``--field-name``), other accepted spellings, old
spellings that still work for one release, its numeric range and how a list is written.
``add_flags(parser, cls)`` adds one argparse argument per field, reading the rest from the field's
type (the approach of transformers' ``HfArgumentParser`` and simple-parsing, kept to what bonbench
needs and without their dependencies):

    bool            ``--x`` (store_true; a field that defaults to True gets ``--no-x``)
    X | None        an optional ``--x`` of type X, left at the field's default when not given
    Literal[...]    ``choices``
    tuple[X, ...]   a repeatable flag; one comma list with ``comma=True``; a positional's values
                    with ``positional=True``
    Mapping[str, X] repeatable ``KEY=VALUE`` pairs (keys: ``-`` read as ``_``)

``from_args(cls, args)`` builds the dataclass from the parsed namespace (no hand mapping) and
checks its ranges; ``check(obj)`` checks a value built in code the same way (``bonbench.core.flags``
words the ranges). A deprecated spelling is accepted and prints one line to stderr. Each flag's
argparse action carries its ``Flag`` (``action.setting``), and ``read(flag, raw)`` reads and checks
one value: ``bonbench.core.settings_file`` reads a ``--config`` file's values through both.

Errors: a value argparse reads (int, float, choices) is argparse's one-line usage error (exit 2);
comma lists, ``KEY=VALUE`` pairs and ``parse`` converters are read by ``from_args``, and they and a
value outside its range or choices are one ``BonbenchError`` line naming the flag (exit 1), raised
before any work. What this module does not do: it knows no command and no setting, and it reads
the environment only for a field that names its ``env`` variable.
"""

from __future__ import annotations

import argparse
import collections.abc
import dataclasses
import functools
import os
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from bonbench.core import flags
from bonbench.core.errors import BonbenchError

if typing.TYPE_CHECKING:
    import _typeshed

T = TypeVar("T", bound="_typeshed.DataclassInstance")  # a settings dataclass
_NOT_GIVEN: Any = dataclasses.MISSING
# the namespace attribute that remembers which old spellings were already warned about in one parse
_WARNED = "_deprecated_spellings_warned"
# ... and which repeatable flags were given (their first use replaces the default)
_GIVEN = "_repeated_flags_given"


def setting(default: Any = _NOT_GIVEN, *, help: str, flag: str | None = None, aliases: Iterable[str] = (),
            deprecated: Iterable[str] = (), range: flags.Range | None = None, metavar: str | None = None,
            env: str | None = None, comma: bool = False, positional: bool = False, const: Any = None,
            parse: Callable[[str], Any] | None = None, cli: bool = True,
            default_factory: Callable[[], Any] | Any = _NOT_GIVEN) -> Any:
    """A dataclass field with its flag's metadata (see the module docstring).

    ``flag``: the spelling shown in ``--help``; ``aliases``: other spellings shown too (``-T``);
    ``deprecated``: old spellings, hidden, accepted with a warning; ``range``: a ``flags.Range``
    (each element of a tuple is checked); ``env``: an environment variable that overrides the
    default; ``const``: the value of the flag given without one (``--ray`` alone); ``parse``: a
    converter from the flag's text, whatever the field's type (its ValueError becomes one error line
    naming the flag; a BonbenchError is shown as it is); ``cli=False``: a setting of library callers
    only (no flag).
    """
    meta: dict[str, Any] = {"help": help, "flag": flag, "aliases": tuple(aliases), "deprecated": tuple(deprecated),
                            "range": range, "metavar": metavar, "env": env, "comma": comma, "positional": positional,
                            "const": const, "parse": parse}
    meta = {k: v for k, v in meta.items() if v not in (None, (), False) or k == "help"}
    if not cli:
        meta["cli"] = False
    if default_factory is not _NOT_GIVEN:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class Flag:
    """How one field is written on the command line (derived from its type and metadata)."""

    name: str  # the field, and the argparse dest
    spelling: str  # --max-tokens (a positional: the field name)
    kind: str  # "value", "bool", "many", "comma", "pairs"
    convert: Callable[[str], Any] | None
    choices: tuple[Any, ...] | None
    default: Any  # the field's default; _NOT_GIVEN for a required field
    meta: Mapping[str, Any]

    @property
    def required(self) -> bool:
        return self.default is _NOT_GIVEN


def flag_spelling(f: dataclasses.Field) -> str:
    """The spelling ``--help`` shows for a field: its ``flag`` metadata, else ``--field-name``
    (``--no-field-name`` for a bool that defaults to True)."""
    if f.metadata.get("flag"):
        return str(f.metadata["flag"])
    dashed = f.name.replace("_", "-")
    return f"--no-{dashed}" if f.default is True else f"--{dashed}"


@functools.cache
def _hints(cls: type) -> Mapping[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
        raise TypeError(f"settings: a union of {rest} has no flag; give the field a parse= converter")
    return tp


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _NOT_GIVEN


def describe_field(cls: type, f: dataclasses.Field) -> Flag:
    """The ``Flag`` of one field of ``cls``."""
    spelling = f.name if f.metadata.get("positional") else flag_spelling(f)
    if f.metadata.get("parse"):  # the converter says what the text means, whatever the type
        return Flag(f.name, spelling, "value", f.metadata["parse"], None, _default_of(f), f.metadata)
    tp = _unwrap_optional(_hints(cls)[f.name])
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    choices = convert = None
    if tp is bool:
        kind = "bool"
    elif origin in (dict, collections.abc.Mapping):
        kind, convert = "pairs", (args[1] if args and args[1] is not Any else str)
    elif origin in (tuple, list, collections.abc.Sequence):
        kind = "comma" if f.metadata.get("comma") else "many"
        convert = _unwrap_optional(args[0]) if args else str
    else:
        kind, convert = "value", tp
    if typing.get_origin(convert) is typing.Literal:
        choices = typing.get_args(convert)
        convert = type(choices[0])
    return Flag(f.name, spelling, kind, convert, choices, _default_of(f), f.metadata)


def flags_of(cls: type) -> list[Flag]:
    """Every field of ``cls`` that has a flag (``cli=False`` ones left out)."""
    return [describe_field(cls, f) for f in dataclasses.fields(cls) if f.init and f.metadata.get("cli", True)]


# ---------------------------------------------------------------------------------------- argparse actions


class _SettingAction(argparse.Action):
    """Base of the actions below: a spelling listed in ``deprecated_to`` warns once per parse."""

    def __init__(self, *args: Any, deprecated_to: str | None = None, setting: Flag | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deprecated_to = deprecated_to
        self.setting = setting  # the field behind the flag: a --config file's value is read as its flag's (settings_file)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self.deprecated_to and option_string:
            warned = namespace.__dict__.setdefault(_WARNED, set())
            if option_string not in warned:
                warned.add(option_string)
                print(f"warning: {option_string} is deprecated; use {self.deprecated_to} (the old spelling goes in "
                      "the next release)", file=sys.stderr)
        setattr(namespace, self.dest, self.value(namespace, values))

    def value(self, namespace: argparse.Namespace, values: Any) -> Any:
        return values


class _Store(_SettingAction):
    pass


class _StoreConst(_SettingAction):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, nargs=0, **kwargs)

    def value(self, namespace: argparse.Namespace, values: Any) -> Any:
        return self.const


class _Append(_SettingAction):
    """A repeatable flag into a tuple; the first use replaces the default, later ones add to it."""

    def value(self, namespace: argparse.Namespace, values: Any) -> Any:
        seen = namespace.__dict__.setdefault(_GIVEN, set())
        before = getattr(namespace, self.dest) if self.dest in seen else ()
        seen.add(self.dest)
        return (*before, values)


def _pairs(texts: Iterable[str], convert: Callable[[str], Any], spelling: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for text in texts:
        key, eq, value = text.partition("=")
        if not eq or not key.strip():
            raise BonbenchError(f"{spelling} takes KEY=VALUE (got {text!r})")
        out[key.strip().replace("-", "_")] = convert(value.strip())
    return out


def _comma(text: str, convert: Callable[[str], Any], spelling: str) -> tuple[Any, ...]:
    try:
        values = tuple(convert(x.strip()) for x in text.split(",") if x.strip())
    except (ValueError, TypeError):
        raise BonbenchError(f"{spelling} takes a value or a comma list such as 0.1,0.7,1.0 (got {text!r})") from None
    if not values:
        raise BonbenchError(f"{spelling} needs at least one value")
    return values


def _parsed(flag: Flag, raw: Any) -> Any:
    """A flag's value from the text argparse stored: comma lists, ``KEY=VALUE`` pairs and ``parse``
    converters are read here, so that their errors are ``BonbenchError`` lines (exit 1) naming the flag."""
    convert = flag.convert or str
    if flag.kind == "many" and isinstance(raw, list):  # a positional's nargs
        return tuple(raw)
    if flag.kind == "pairs" and isinstance(raw, tuple):
        return _pairs(raw, convert, flag.spelling)
    if flag.kind == "comma" and isinstance(raw, str):
        return _comma(raw, convert, flag.spelling)
    if flag.meta.get("parse") and isinstance(raw, str):
        try:
            return convert(raw)
        except (ValueError, TypeError) as exc:
            raise BonbenchError(f"{flag.spelling}: {exc}") from None
    return raw


def _argument(flag: Flag, help_text: str | None) -> dict[str, Any]:
    """``add_argument`` keywords of one flag (without its spellings)."""
    meta = flag.meta
    default = os.environ.get(meta["env"], flag.default) if meta.get("env") else flag.default
    kw: dict[str, Any] = {"help": meta.get("help") if help_text is None else help_text}
    if flag.kind == "bool":
        return {**kw, "action": _StoreConst, "const": not flag.default, "default": flag.default}
    # comma lists, pairs and parse converters are read by from_args (a BonbenchError, exit 1)
    convert = str if flag.kind in ("pairs", "comma") or meta.get("parse") else (flag.convert or str)
    if flag.kind == "pairs":
        kw.update(action=_Append, metavar=meta.get("metavar", "KEY=VALUE"))
    elif flag.kind == "comma":
        kw.update(action=_Store)
    elif flag.kind == "many" and meta.get("positional"):
        kw.update(action=_Store, type=convert, nargs="+" if flag.required else "*")
    elif flag.kind == "many":
        kw.update(action=_Append, type=convert)
    else:
        kw.update(action=_Store, type=convert)
        if "const" in meta:
            kw.update(nargs="?", const=meta["const"])
    if flag.choices is not None:
        kw["choices"] = flag.choices
    if meta.get("positional"):
        kw.setdefault("metavar", meta.get("metavar"))
        if not flag.required:
            kw.update(default=default, nargs=kw.get("nargs", "?"))
        return kw
    if flag.choices is None:  # argparse shows {a,b,c} for choices
        kw.setdefault("metavar", meta.get("metavar") or flag.spelling.lstrip("-").replace("-", "_").upper())
    if flag.required:
        kw["required"] = True
    else:
        kw["default"] = default
    return kw


def add_flags(parser: Any, cls: type, *, skip: Iterable[str] = (), only: Iterable[str] | None = None,
              help: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None) -> list[Flag]:
    """Add one argument per field of ``cls`` to ``parser`` (an ``ArgumentParser`` or an argument
    group), in field order: all but ``skip`` (or just ``only``). Where a command reads a setting
    differently (``score --model`` names imported samples), ``help`` replaces its help text and
    ``defaults`` its default (the field's ``env`` variable then does not apply). Returns the flags added."""
    chosen = set(only) if only is not None else None
    added = []
    for flag in flags_of(cls):
        if flag.name in set(skip) or (chosen is not None and flag.name not in chosen):
            continue
        if defaults and flag.name in defaults:
            flag = dataclasses.replace(flag, default=defaults[flag.name],
                                       meta={k: v for k, v in flag.meta.items() if k != "env"})
        kw = {**_argument(flag, (help or {}).get(flag.name)), "setting": flag}
        if flag.meta.get("positional"):
            parser.add_argument(flag.name, **kw)
        else:
            old_spellings = flag.meta.get("deprecated", ())
            shown = {**kw, "help": f"{kw['help']} (deprecated old spelling: {', '.join(old_spellings)})"} \
                if old_spellings and kw.get("help") else kw
            parser.add_argument(flag.spelling, *flag.meta.get("aliases", ()), dest=flag.name, **shown)
            for old in old_spellings:
                hidden = {**kw, "help": argparse.SUPPRESS, "default": argparse.SUPPRESS, "required": False}
                parser.add_argument(old, dest=flag.name, deprecated_to=flag.spelling, **hidden)
        added.append(flag)
    return added


# ---------------------------------------------------------------------------------------- values


def values(cls: type, args: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The values of the fields of ``cls`` that ``args`` (parsed flags) holds, read as the fields'
    types (comma lists, ``KEY=VALUE`` pairs, ``parse`` converters); fields it does not hold are
    left out (their defaults apply)."""
    parsed = vars(args) if isinstance(args, argparse.Namespace) else dict(args)
    return {flag.name: _parsed(flag, parsed[flag.name]) for flag in flags_of(cls) if flag.name in parsed}


def read(flag: Flag, raw: Any) -> Any:
    """One flag's value from what argparse stored for it, read as ``from_args`` reads it and checked
    (range, choices): a ``BonbenchError`` line naming the flag. ``settings_file`` reads a file's values
    through it, so that a value is refused in a file exactly as on the command line."""
    value = _parsed(flag, raw)
    _check_value(flag, flag.spelling, value)
    return value


def from_args(cls: type[T], args: argparse.Namespace | Mapping[str, Any], **given: Any) -> T:
    """``cls`` built from parsed flags: each field from ``given``, else ``values(cls, args)``, else
    its default; then ``check``-ed (ranges and choices: one ``BonbenchError`` line)."""
    unknown = set(given) - {f.name for f in dataclasses.fields(cls) if f.init}
    if unknown:
        raise TypeError(f"{cls.__name__} has no setting {', '.join(sorted(unknown))}")
    obj = cls(**{**values(cls, args), **given})
    check(obj)
    return obj


def check(obj: Any) -> None:
    """A one-line ``BonbenchError`` for the first field of a settings dataclass outside its range or
    choices, naming the flag: ``--batch-size must be >= 1 (got 0)``."""
    cls = type(obj)
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            _check_value(describe_field(cls, f), flag_spelling(f), getattr(obj, f.name))


def check_args(cls: type, args: argparse.Namespace) -> None:
    """``check`` for the flags of ``cls`` that a command took without building ``cls`` (``merge``
    takes ``--n-boot`` of ``RunRequest``)."""
    parsed = vars(args)
    for flag in flags_of(cls):
        if flag.name in parsed:
            _check_value(flag, flag.spelling, _parsed(flag, parsed[flag.name]))


def _check_value(flag: Flag, spelling: str, value: Any) -> None:
    if value is None:
        return
    r = flag.meta.get("range")
    for item in value if isinstance(value, (tuple, list)) else (value,):
        if r is not None and isinstance(item, (int, float)) and not isinstance(item, bool) and not flags.in_range(item, r):
            raise BonbenchError(f"{spelling} must be {flags.describe(r)} (got {item:g})")
        if flag.choices is not None and item not in flag.choices:
            raise BonbenchError(f"{spelling} must be one of {', '.join(map(str, flag.choices))} (got {item!r})")


def ranges(cls: type) -> dict[str, flags.Range]:
    """``{field: range}`` of the fields of ``cls`` that declare one."""
    return {f.name: f.metadata["range"] for f in dataclasses.fields(cls) if f.metadata.get("range")}
