"""``--config FILE.toml``: a command's settings read from a TOML file, under the flags given with it.

Every subcommand takes ``--config FILE`` (``add_config_flags``). ``apply(parser, argv)`` runs before
argparse parses: it finds the command and its ``--config`` in ``argv``, reads the file and makes each
value the default of its flag, so the flags given on the command line override the file and the
parsed namespace holds the same values as if the file's settings had been typed as flags (the run's
config.json and its hash are the same). Order of precedence: a flag given, then the file, then a
``BONBENCH_*`` environment variable, then the field's default. A repeatable flag given on the
command line (``--metric``, ``-T``) replaces the file's list of it whole, as it replaces a default.

Keys are the flags without their leading dashes, as ``--help`` spells them (``max-tokens``,
``metric``, ``temperature``), ``_`` and ``-`` alike (``n_boot`` is ``n-boot``); a positional argument
and a setting with only a short flag (``-T``, ``-O``) by its field name (``paths``, ``task_args``).
Values are TOML values: a string, number or boolean for one flag; an array for a repeatable flag,
a comma list or several positionals; a table for ``KEY=VALUE`` pairs (``task_args = {subset =
"algebra"}``); ``true`` for a switch (``false`` leaves it off). An old spelling is read and warns
once, as its flag does.

Errors are one line naming the file, raised as ``BonbenchError`` before any work: a missing,
unreadable, non-UTF-8 or malformed file (with the fix), an unknown key (with the nearest valid
ones), a setting given twice, and a value its flag would refuse (the flag's own message: argparse's
for types and choices, ``settings.read``'s for comma lists, pairs and ranges).

What this module does not do: it knows no command and no setting (it reads the parser's actions),
writes nothing, and reads no other file; parsing itself stays argparse's.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bonbench.core import settings
from bonbench.core.errors import BonbenchError

FLAG = "--config"
DEST = "config"
HELP = ("a TOML file of this command's settings: keys are the flags without their dashes (docs/configuration.md); "
        "flags given here override the file")


class _ConfigFlag(argparse.Action):
    """``--config FILE`` in the real parse. ``apply`` has already read the file it names; a spelling
    it could not see (an abbreviation such as ``--conf``) would leave the file unread, so it is refused."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if parser.get_default(self.dest) != values:
            parser.error(f"{option_string} {values} was not read; write it as {FLAG} {values}")
        setattr(namespace, self.dest, values)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    # argparse lists a parser's arguments only in ``_actions``; the subcommands action is the one of nargs PARSER
    action = next((a for a in parser._actions if a.nargs == argparse.PARSER), None)
    return dict(action.choices) if action is not None and action.choices else {}


def leaf_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser under ``parser`` that runs a command (``run``, ``sandbox run``, ...), once each."""
    subs = _subcommands(parser)
    if not subs:
        yield parser
        return
    seen: set[int] = set()
    for sub in subs.values():
        if id(sub) not in seen:  # an alias names the same parser twice
            seen.add(id(sub))
            yield from leaf_parsers(sub)


def add_debug_flags(parser: argparse.ArgumentParser) -> None:
    """Give every command under ``parser`` a ``--debug`` flag (show tracebacks instead of one line),
    as ``add_config_flags`` gives each ``--config``: written once, not per command."""
    for leaf in leaf_parsers(parser):
        leaf.add_argument("--debug", action="store_true", help="show tracebacks")


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Give every command under ``parser`` a ``--config FILE`` flag."""
    for leaf in leaf_parsers(parser):
        leaf.add_argument(FLAG, dest=DEST, metavar="FILE.toml", action=_ConfigFlag, help=HELP)


def _command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[argparse.ArgumentParser, list[str]] | None:
    """The parser of the command ``argv`` names and the words after its name (None: argparse will
    report the command line as it is)."""
    current, rest = parser, list(argv)
    while subs := _subcommands(current):
        at = next((i for i, word in enumerate(rest) if not word.startswith("-")), None)
        if at is None or rest[at] not in subs:
            return None
        current, rest = subs[rest[at]], rest[at + 1:]
    return current, rest


def apply(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Path | None:
    """Read the ``--config FILE`` of the command in ``argv`` (if any) into its parser's defaults;
    returns the file read. Call it on a freshly built parser, before ``parser.parse_args(argv)``."""
    found = _command(parser, argv)
    if found is None:
        return None
    command, rest = found
    scan = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    scan.add_argument(FLAG, action="append", default=[])
    given = scan.parse_known_args(rest)[0].config
    if not given:
        return None
    if len(given) > 1:
        raise BonbenchError(f"{FLAG} was given {len(given)} times ({', '.join(given)}); give one file")
    path = Path(given[0])
    defaults = read(command, path)
    command.set_defaults(**defaults, **{DEST: given[0]})
    for action in command._actions:  # a setting the file gives is no longer required on the command line
        if action.dest in defaults:
            if action.option_strings:
                action.required = False
            elif action.nargs in (None, "+"):
                action.nargs = "?" if action.nargs is None else "*"
    return path


# ---------------------------------------------------------------------------------------- the file


def load(path: Path) -> dict[str, Any]:
    """The TOML document at ``path``; a one-line ``BonbenchError`` naming the file and the fix."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BonbenchError(f"{path}: no such file; {FLAG} takes a TOML file of the command's settings") from None
    except IsADirectoryError:
        raise BonbenchError(f"{path}: is a folder; {FLAG} takes a TOML file of the command's settings") from None
    except OSError as exc:
        raise BonbenchError(f"{path}: cannot be read ({exc.strerror or exc}); make it readable") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BonbenchError(f"{path}: byte {exc.start} is not UTF-8; save the file as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BonbenchError(f"{path}: not valid TOML: {exc}; fix it there (https://toml.io)") from None


@dataclass(frozen=True)
class ConfigKey:
    """What a key of a config file sets: the argparse action of its flag, and for an old spelling the
    flag it now is."""

    action: argparse.Action
    deprecated_to: str | None  # the flag an old spelling now is


def _norm(key: str) -> str:
    return key.strip().replace("_", "-")


def keys(parser: argparse.ArgumentParser) -> dict[str, ConfigKey]:
    """The keys a config file of ``parser``'s command may hold (normalised: ``-`` for ``_``)."""
    out: dict[str, ConfigKey] = {}
    for action in parser._actions:
        if action.dest in (DEST, "help", "version", argparse.SUPPRESS):
            continue
        deprecated = getattr(action, "deprecated_to", None)
        long = [o for o in action.option_strings if o.startswith("--")]
        for name in (o[2:] for o in long) if long else (action.dest,):
            out[_norm(name)] = ConfigKey(action, deprecated)
    return out


def read(parser: argparse.ArgumentParser, path: Path) -> dict[str, Any]:
    """The file's values by argparse dest, each as the parse of its flag would store it."""
    doc = load(path)
    table = keys(parser)
    command = parser.prog
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for raw_key, value in doc.items():
        key = _norm(raw_key)
        if key not in table:
            near = difflib.get_close_matches(key, [k for k, v in table.items() if not v.deprecated_to], n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(near)}?" if near else f"the keys are the flags of `{command} --help`"
            raise BonbenchError(f"{path}: unknown key {raw_key!r} for `{command}`; {hint}")
        entry = table[key]
        dest = entry.action.dest
        if dest in spelled:
            raise BonbenchError(f"{path}: {spelled[dest]} and {raw_key} are the same setting; keep one")
        if entry.deprecated_to:
            print(f"warning: {path}: {raw_key} is deprecated; use {entry.deprecated_to.lstrip('-')} (the old spelling "
                  "goes in the next release)", file=sys.stderr)
        try:
            converted = _value(entry.action, raw_key, value)
        except BonbenchError as exc:
            raise BonbenchError(f"{path}: {exc}") from None
        spelled[dest] = raw_key
        if converted is not _OFF:
            values[dest] = converted
    return values


_OFF: Any = object()  # a switch set to false: its default stays


def _text(value: Any) -> str:
    """A TOML scalar as the word a user would type for it (booleans as TOML writes them)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _words(action: argparse.Action, key: str, value: Any, setting: settings.Flag | None) -> list[str]:
    kind = setting.kind if setting is not None else ""
    many = kind in ("many", "pairs") or action.nargs in ("+", "*")
    if isinstance(value, dict):
        if kind != "pairs":
            raise BonbenchError(f"{key} takes {'a list' if many else 'one value'}, not a table")
        items = list(value.items())
        if any(isinstance(v, (dict, list)) for _, v in items):
            raise BonbenchError(f"{key}: each KEY = VALUE of the table takes one value")
        return [f"{k}={_text(v)}" for k, v in items]
    if isinstance(value, list):
        if any(isinstance(v, (dict, list)) for v in value):
            raise BonbenchError(f"{key} takes a list of values, not of lists or tables")
        if kind == "comma":
            return [",".join(map(_text, value))]
        if not many:
            raise BonbenchError(f"{key} takes one value, not a list")
        return [_text(v) for v in value]
    return [_text(value)]


def _convert(action: argparse.Action, word: str) -> Any:
    """One word through the action's type and choices, refused with argparse's own words."""
    name = "/".join(action.option_strings) or action.dest
    value: Any = word
    if callable(action.type):
        try:
            value = action.type(word)
        except argparse.ArgumentTypeError as exc:
            raise BonbenchError(f"argument {name}: {exc}") from None
        except (TypeError, ValueError):
            type_name = getattr(action.type, "__name__", repr(action.type))
            raise BonbenchError(f"argument {name}: invalid {type_name} value: {word!r}") from None
    if action.choices is not None and value not in action.choices:
        raise BonbenchError(f"argument {name}: invalid choice: {value!r} (choose from "
                            f"{', '.join(map(repr, action.choices))})")
    return value


def _value(action: argparse.Action, key: str, value: Any) -> Any:
    """``value`` from the file as the parse of ``action``'s flag would store it, checked as the flag is."""
    setting: settings.Flag | None = getattr(action, "setting", None)
    if action.nargs == 0:  # a switch: store_true and its kin
        if not isinstance(value, bool):
            raise BonbenchError(f"{key} takes true or false (got {value!r})")
        return action.const if value else _OFF
    if action.nargs == argparse.OPTIONAL and value is True and action.option_strings:
        stored: Any = action.const  # --ray alone
    else:
        words = _words(action, key, value, setting)
        converted = [_convert(action, w) for w in words]
        if action.nargs in ("+", "*"):
            stored = converted  # a list, as argparse stores these
        elif setting is not None and setting.kind in ("many", "pairs"):
            stored = tuple(converted)  # what the repeatable flag's action stores
        else:
            if len(converted) != 1:
                raise BonbenchError(f"{key} takes one value")
            stored = converted[0]
    if setting is not None:
        settings.read(setting, stored)  # comma lists, pairs, parse converters, ranges: the flag's own errors
    return stored
