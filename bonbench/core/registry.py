"""One registry for every plugin kind, and one coercion of CLI strings into annotated types.

A ``Registry`` maps names to plugins of one kind (tasks, verifiers, reward models, samplers,
objectives). A registered target is one of:

- the object itself (a factory, a record), registered in-process by a decorator;
- a lazy ``"package.module:attr"`` string, imported the first time the name is asked for;
- an ``importlib.metadata.EntryPoint`` of the kind's entry-point group (``bonbench.tasks``,
  ``bonbench.verifiers``, ``bonbench.reward_models``, ``bonbench.samplers``, ``bonbench.objectives``),
  also imported on first use.

An entry point whose value is a bare module (``toy = "toy_pkg.tasks"``) is imported when the
group is first read: importing it runs its ``register_*`` decorators, which is how one module
registers several names (the shape of inspect_ai's registry). An entry point named ``prefix:``
(``rm:``, ``learned:``, ``hf:``) registers a *scheme*: ``get("rm:imdb-sentiment")`` calls the
scheme's factory with the rest of the name. Entry points are read once per process. A name
registered in-process wins over installed metadata. A plugin that cannot be imported is one line
naming it and the distribution to reinstall: a ``BonbenchError`` when it is asked for, a warning
when reading the group (so one broken package does not take the others down).

``coerce(value, annotation, param=..., owner=...)`` turns a ``-T`` / ``-O`` / ``?key=value``
string into a factory parameter's annotated type (int, float, bool, str, Path, Optional/Union,
Literal choices, tuple/list of those); a string of the wrong type is a one-line ``BonbenchError``
naming the parameter and its type.

This module imports no other bonbench layer than core, and imports no plugin until asked to.
"""

from __future__ import annotations

import collections.abc
import importlib
import inspect
import sys
import types
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeGuard, TypeVar, Union, cast

from bonbench.core.errors import BonbenchError

if TYPE_CHECKING:  # importlib.metadata is imported when an entry-point group is first read (not by --help)
    from importlib.metadata import EntryPoint

T = TypeVar("T")
Target = Union[Any, str, "EntryPoint"]  # the object, a lazy "module:attr", or an entry point

_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Collection, collections.abc.Iterable)
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass
class Entry:
    """One registered name: its target (loaded or lazy) and metadata given at registration."""

    target: Target
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def loaded(self) -> bool:
        return not isinstance(self.target, str) and not _is_entry_point(self.target)


def entry_points(group: str) -> Any:
    """``importlib.metadata.entry_points(group=group)``, importing importlib.metadata only now: the
    registries read their groups on first use, and start-up (``bonbench --help``) needs none."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def _is_entry_point(target: Any) -> TypeGuard[EntryPoint]:
    # an EntryPoint exists only once importlib.metadata is imported: no need to import it to ask
    metadata = sys.modules.get("importlib.metadata")
    return metadata is not None and isinstance(target, metadata.EntryPoint)


def load_target(ref: str) -> Any:
    """``"package.module:attr"`` (or ``"package.module"``) -> the attribute (or the module)."""
    module, _, attr = ref.partition(":")
    value: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        value = getattr(value, part)
    return value


def _describe(target: Target) -> tuple[str, str]:
    """(what the target points at, the distribution that provides it) for error messages."""
    if _is_entry_point(target):
        dist = getattr(target, "dist", None)
        return target.value, (dist.name if dist is not None else "the package that provides it")
    if isinstance(target, str):
        return target, "bonbench"
    return getattr(target, "__qualname__", repr(target)), "the package that provides it"


def broken_plugin(kind: str, name: str, target: Target, exc: BaseException) -> str:
    """The one line that names a plugin that failed to import and what to reinstall."""
    where, dist = _describe(target)
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"{kind} {name!r} ({where}) failed to load: {type(exc).__name__}: {reason}; reinstall {dist}"


class Registry(Generic[T]):
    """Name -> plugin of one ``kind``; ``group`` is its entry-point group (module docstring)."""

    def __init__(self, kind: str, group: str) -> None:
        self.kind = kind
        self.group = group
        self._entries: dict[str, Entry] = {}
        self._schemes: dict[str, Entry] = {}
        self._read = False

    # -------------------------------------------------------------- registering

    def add(self, name: str, target: Target, **meta: Any) -> None:
        """Register ``target`` (an object, a lazy ``"module:attr"`` or an entry point) under ``name``;
        a name ending in ``:`` is a scheme. An in-process object replaces a lazy target of that name."""
        table = self._schemes if name.endswith(":") else self._entries
        old = table.get(name)
        if old is not None and old.loaded and not Entry(target).loaded:
            return  # registered in-process (decorator) wins over installed metadata
        merged = {**(old.meta if old is not None else {}), **meta}
        table[name] = Entry(target, merged)

    def register(self, name: str, **meta: Any) -> Callable[[Any], Any]:
        """Decorator form of ``add``: ``@registry.register("name", key=value)``."""

        def deco(obj: Any) -> Any:
            self.add(name, obj, **meta)
            return obj

        return deco

    def read_entry_points(self) -> None:
        """Read the entry-point group (once): index named targets, import bare modules."""
        if self._read:
            return
        self._read = True
        for ep in entry_points(group=self.group):
            if ep.attr is None and not ep.name.endswith(":"):
                try:
                    importlib.import_module(ep.module)  # its decorators register its names
                except Exception as exc:  # noqa: BLE001  one broken plugin must not take the others down
                    warnings.warn("bonbench: " + broken_plugin(f"{self.kind} plugin", ep.name, ep, exc), stacklevel=3)
                continue
            self.add(ep.name, ep)

    # -------------------------------------------------------------- looking up

    def names(self) -> list[str]:
        """The registered plain names, sorted (nothing is imported but bare-module entry points)."""
        self.read_entry_points()
        return sorted(self._entries)

    def schemes(self) -> list[str]:
        """The registered scheme prefixes (``rm:``, ...), sorted."""
        self.read_entry_points()
        return sorted(self._schemes)

    def __contains__(self, name: object) -> bool:
        self.read_entry_points()
        return isinstance(name, str) and (name in self._entries or self.scheme_of(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def scheme_of(self, name: str) -> str | None:
        """The registered scheme prefix ``name`` starts with (the longest), else None."""
        self.read_entry_points()
        hits = [p for p in self._schemes if name.startswith(p)]
        return max(hits, key=len) if hits else None

    def meta(self, name: str) -> Mapping[str, Any]:
        """The metadata registered with ``name`` (or its scheme), without importing it."""
        self.read_entry_points()
        entry = self._entries.get(name) or self._schemes.get(self.scheme_of(name) or "")
        return dict(entry.meta) if entry is not None else {}

    def remove(self, name: str) -> None:
        """Forget ``name`` (a plugin or a ``prefix:`` scheme); for tests and interactive reloads."""
        self._entries.pop(name, None)
        self._schemes.pop(name, None)

    def unknown(self, name: str, hint: str = "") -> BonbenchError:
        """The one-line error for a name nobody registered."""
        choices = ", ".join(self.names() + [p + "..." for p in self.schemes()]) or "none installed"
        return BonbenchError(f"unknown {self.kind} {name!r}; choose one of: {choices}{hint}")

    def get(self, name: str, hint: str = "") -> T:
        """The plugin registered as ``name`` (imported now if lazy). For a scheme name this is the
        scheme's factory; call ``resolve`` to get it with the rest of the name."""
        self.read_entry_points()
        if name in self._entries:
            return self._load(self._entries, name)
        prefix = self.scheme_of(name)
        if prefix is None:
            raise self.unknown(name, hint)
        return self._load(self._schemes, prefix)

    def resolve(self, name: str, hint: str = "") -> tuple[T, str | None]:
        """(plugin, None) for a plain name; (scheme factory, rest of the name) for ``prefix:rest``."""
        self.read_entry_points()
        if name in self._entries:
            return self._load(self._entries, name), None
        prefix = self.scheme_of(name)
        if prefix is None:
            raise self.unknown(name, hint)
        return self._load(self._schemes, prefix), name[len(prefix):]

    def _load(self, table: dict[str, Entry], name: str) -> T:
        entry = table[name]
        if entry.loaded:
            return cast(T, entry.target)  # loaded: the target is the registered object itself
        try:
            value = load_target(entry.target) if isinstance(entry.target, str) else entry.target.load()
        except Exception as exc:  # noqa: BLE001  a broken plugin: one line naming it and its package
            raise BonbenchError(broken_plugin(self.kind, name, entry.target, exc)) from None
        current = table[name]
        if not current.loaded:  # importing it did not register it in-process: the loaded object is it
            table[name] = Entry(value, current.meta)
        return cast(T, table[name].target)


# ------------------------------------------------------------------ coercion


def parameter_types(fn: Callable[..., Any]) -> dict[str, Any]:
    """Parameter name -> annotation of ``fn`` (string annotations resolved where they can be)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001  an unresolvable annotation: keep the raw ones
        hints = {}
    target = fn.__init__ if inspect.isclass(fn) else fn
    params = inspect.signature(target).parameters
    return {k: hints.get(k, p.annotation) for k, p in params.items() if k != "self"}


def _resolve_annotation(annotation: Any) -> Any:
    if isinstance(annotation, str):  # postponed annotation that get_type_hints could not resolve
        namespace = {**vars(typing), "Path": Path}
        try:
            return eval(annotation, namespace)  # noqa: S307  an annotation written in our own source
        except Exception:  # noqa: BLE001  an annotation that does not evaluate: coerce nothing
            return Any
    return annotation


def type_name(annotation: Any) -> str:
    """How an annotation reads in an error message: ``int``, ``int or None``, ``one of 'a', 'b'``."""
    annotation = _resolve_annotation(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin in _SEQUENCES:
        inner = [a for a in args if a is not Ellipsis]
        return "a comma-separated list of " + (type_name(inner[0]) if inner else "str")
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _coerce_one(value: str, annotation: Any) -> Any:
    """``value`` as ``annotation``, or ValueError."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in (Any, str, inspect.Parameter.empty, object) or annotation is None:
        return value
    if origin is Literal:
        for choice in args:
            if str(choice) == value or (isinstance(choice, str) and choice.lower() == value.lower()):
                return choice
        raise ValueError(value)
    if origin in (Union, types.UnionType):
        if type(None) in args and value.lower() in ("none", "null"):
            return None
        # str last: it takes anything, so every narrower type gets its chance first
        for arg in sorted((a for a in args if a is not type(None)), key=lambda a: a is str):
            try:
                return _coerce_one(value, arg)
            except ValueError:
                continue
        raise ValueError(value)
    if origin in _SEQUENCES:
        return _coerce_sequence(value, origin, args)
    if annotation is bool:
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError(value)
    if annotation is type(None):
        if value.lower() in ("none", "null"):
            return None
        raise ValueError(value)
    if annotation in (int, float) or (inspect.isclass(annotation) and annotation is Path):
        return annotation(value)
    return value  # a type we cannot parse from text: the factory checks it


def _coerce_sequence(value: str, origin: Any, args: tuple[Any, ...]) -> Any:
    parts = [p.strip() for p in value.split(",")] if value.strip() else []
    if origin is tuple and args and Ellipsis not in args:  # tuple[int, str]: fixed length
        if len(parts) != len(args):
            raise ValueError(value)
        return tuple(_coerce_one(p, a) for p, a in zip(parts, args, strict=True))
    item = args[0] if args else str
    items = [_coerce_one(p, item) for p in parts]
    return list(items) if origin is list else (set(items) if origin in (set, frozenset) else tuple(items))


def coerce(value: Any, annotation: Any, *, param: str, owner: str, noun: str = "argument") -> Any:
    """``value`` as the annotated type when it is a CLI string; a non-string passes unchanged.

    A string that is not of the type raises ``BonbenchError`` in one line, e.g.
    ``task 'math' argument fewshot takes int, got 'abc'`` (``noun``: what the owner calls it).
    """
    if not isinstance(value, str):
        return value
    annotation = _resolve_annotation(annotation)
    try:
        return _coerce_one(value, annotation)
    except ValueError:
        raise BonbenchError(f"{owner} {noun} {param} takes {type_name(annotation)}, got {value!r}") from None


def coerce_kwargs(fn: Callable[..., Any], given: Mapping[str, Any], *, owner: str, hidden: tuple[str, ...] = (),
                  noun: str = "argument", listing: str | None = None) -> dict[str, Any]:
    """``given`` checked against ``fn``'s keyword parameters and coerced by annotation. An unknown key
    is one line naming the ones it takes (``hidden`` parameters are not offered; ``listing`` is what
    the message calls them, default ``noun`` + "s")."""
    types_ = parameter_types(fn)
    params = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    out: dict[str, Any] = {}
    for key, value in given.items():
        if key not in types_ or params.get(key) is not None and params[key].kind is inspect.Parameter.VAR_KEYWORD:
            if takes_any:
                out[key] = value
                continue
            allowed = ", ".join(k for k, p in params.items() if k not in hidden and k != "self"
                                and p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL))
            raise BonbenchError(f"{owner} has no {noun} {key!r}; its {listing or noun + 's'} are: {allowed or 'none'}")
        out[key] = coerce(value, types_[key], param=key, owner=owner, noun=noun)
    return out
