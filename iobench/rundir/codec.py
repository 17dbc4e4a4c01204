"""The one JSON codec of the run directory's typed records (meta.json and its parts): a key is
a dataclass field with its one-line doc and its rules (``key``), a record is written in field
order with the keys it did not know kept (``encode``), and read back checked value by value
against its field's type and rules (``decode``): one RunDirError line naming the key. A run
directory is untrusted input, so nothing read passes unchecked — names must be safe path
components, paths absolute and without ``..``, numbers finite and in range."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import field
from pathlib import PurePosixPath
from typing import Any, TypeVar

from iobench.errors import RunDirError
from iobench.rundir.records import safe_name_problem


def key(
    doc: str,
    default: Any = None,
    *,
    check: str = "",
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] = (),
) -> Any:
    """A meta.json key with its one-line doc; ``check``: ``name`` (a path component),
    ``path`` (absolute, no ``..``) or ``list`` (choices, comma-separated); ``lo``/``hi``: the
    range a number must lie in; ``choices``: the values a string may take."""
    meta = {"doc": doc, "check": check, "lo": lo, "hi": hi, "choices": choices}
    if isinstance(default, (dict, list)):
        factory = dict if isinstance(default, dict) else list
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _extra() -> Any:
    return field(default_factory=dict, metadata={"doc": "", "extra": True}, compare=False)


def extra() -> Any:
    """The field that keeps the keys a record did not know (a newer iobench's)."""
    return field(default_factory=dict, metadata={"doc": "", "extra": True}, compare=False)


T = TypeVar("T")


def encode(record: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if f.metadata.get("extra"):
            extra = value
        elif dataclasses.is_dataclass(value):
            out[f.name] = encode(value)
        elif isinstance(value, dict):
            out[f.name] = {
                k: encode(v) if dataclasses.is_dataclass(v) else v for k, v in value.items()
            }
        else:
            out[f.name] = value
    return {**out, **{k: v for k, v in extra.items() if k not in out}}


_HINTS: dict[type, dict[str, Any]] = {}


def hints(record: type) -> dict[str, Any]:
    if record not in _HINTS:
        _HINTS[record] = typing.get_type_hints(record)
    return _HINTS[record]


def decode(record: type[T], data: object, where: str) -> T:
    if not isinstance(data, dict):
        raise RunDirError(f"{where}: expected an object, found {type(data).__name__}")
    values: dict[str, Any] = {}
    known = set()
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        known.add(f.name)
        if f.metadata.get("extra") or f.name not in data:
            continue
        values[f.name] = _value(hints(record)[f.name], data[f.name], f, f"{where}: {f.name}")
    extra = {str(k): v for k, v in data.items() if k not in known}
    if any(f.name == "extra" for f in dataclasses.fields(record)):  # type: ignore[arg-type]
        values["extra"] = extra
    return record(**values)


def _value(hint: Any, value: object, f: dataclasses.Field, where: str) -> Any:
    """Check one JSON value against its field's type and rules."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType):
        if value is None and type(None) in args:
            return None
        hint = next(a for a in args if a is not type(None))
        args = typing.get_args(hint)
    origin = typing.get_origin(hint) or hint
    if dataclasses.is_dataclass(origin):
        return decode(origin, value, where)  # type: ignore[arg-type]
    if origin is dict:
        if not isinstance(value, dict):
            raise RunDirError(f"{where}: expected an object, found {type(value).__name__}")
        inner = args[1] if args else Any
        if dataclasses.is_dataclass(inner):
            for name in value:
                check_name(str(name), f"{where}.{name}")
            return {str(k): decode(inner, v, f"{where}.{k}") for k, v in value.items()}
        if inner is str and not all(isinstance(v, str) for v in value.values()):
            raise RunDirError(f"{where}: expected an object of strings")
        return value
    if origin is list:
        if not isinstance(value, list) or not all(_is_strings(v, args[0]) for v in value):
            raise RunDirError(
                f"{where}: expected a list of {'lists of ' if args[0] is not str else ''}strings"
            )
        return value
    if origin is str:
        return _text(value, f, where)
    return _number(origin, value, f, where)


def _is_strings(value: object, hint: Any) -> bool:
    """``value`` is a str (``hint`` str) or a list of str (``hint`` list[str])."""
    if hint is str:
        return isinstance(value, str)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _text(value: object, f: dataclasses.Field, where: str) -> str:
    if not isinstance(value, str) or "\0" in value:
        raise RunDirError(f"{where}: expected a string")
    choices, check = f.metadata.get("choices"), f.metadata.get("check")
    if choices and not set(value.split(",") if check == "list" else [value]) <= set(choices):
        raise RunDirError(f"{where}: {value[:40]!r} is not one of {', '.join(choices)}")
    if check == "name":
        check_name(value, where)
    elif check == "path":
        _check_path(value, where)
    return value


def _number(kind: type, value: object, f: dataclasses.Field, where: str) -> float:
    ok = isinstance(value, int) if kind is int else isinstance(value, (int, float))
    if not ok or isinstance(value, bool):
        raise RunDirError(
            f"{where}: expected {'an integer' if kind is int else 'a number'}, found {str(value)[:40]!r}"
        )
    lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
    try:
        number = float(value)  # type: ignore[arg-type]
    except OverflowError:
        number = math.inf
    if (
        not math.isfinite(number)
        or (lo is not None and number < lo)
        or (hi is not None and number > hi)
    ):
        bounds = (
            f"[{lo if lo is not None else -math.inf:g}, {hi if hi is not None else math.inf:g}]"
        )
        raise RunDirError(f"{where}: {str(value)[:40]} is not a finite number in {bounds}")
    return value  # type: ignore[return-value]


def check_name(value: str, where: str) -> None:
    problem = safe_name_problem(value)
    if problem:
        raise RunDirError(f"{where}: {value[:40]!r} {problem}")


def _check_path(value: str, where: str) -> None:
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts:
        raise RunDirError(f"{where}: {value[:80]!r} is not an absolute path without '..'")


__all__ = ["check_name", "decode", "encode", "extra", "hints", "key"]
