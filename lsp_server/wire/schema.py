"""Params held to LSP's schema: a JSON value of the wrong kind is refused, never converted.

pygls structures params with lsprotocol's cattrs converter, which is lenient in two ways:

* where the schema names ``str``, ``int``, ``float`` or ``bool``, cattrs calls that type on
  the value: ``int("1")`` and ``int(1.9)`` for a position, ``str(None)`` for an edit's text,
  ``str(12345)`` for a document. :func:`strict_scalars` replaces those four hooks with ones
  that only accept the matching JSON kind;
* lsprotocol's hooks for unions (``languageId: LanguageKind | string``, a token's
  ``integer | string``, ...) hand any scalar through unchecked, so ``languageId: 7`` arrives as
  an ``int``. :func:`schema_problem_of` walks the structured params once and checks every
  scalar against its field's declared type, except in fields whose type the strict hooks
  already guarantee (a plain scalar, or a class made only of such fields, as ``Range`` is):
  a "Replace All" ``didChange`` holds tens of thousands of ranges, and walking each of their
  positions again cost the event loop as much as structuring them.

Together they make a request whose params break the schema an ``InvalidParams`` answer and a
notification a dropped message with a warning (``protocol.SeamProtocol._decode``), as the
README promises, while valid traffic structures exactly as before. Problems name the field
and the JSON kinds, never a value: values may be the user's text.
"""

from __future__ import annotations

import enum
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

_SCALARS = (str, int, float, bool)


def _kind(value: Any) -> str:
    """The JSON kind of ``value`` (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, (list, tuple)) else "an object"


def _strict_str(value: Any, _type: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {_kind(value)}")
    return value


def _strict_int(value: Any, _type: type) -> int:
    # bool is an int to Python, not to JSON; 1.0 and 1.9 are not integers in LSP.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, not {_kind(value)}")
    return value


def _strict_float(value: Any, _type: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, not {_kind(value)}")
    return float(value)


def _strict_bool(value: Any, _type: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, not {_kind(value)}")
    return value


def strict_scalars(converter: Any) -> None:
    """Make ``converter`` refuse a scalar of the wrong JSON kind where the schema names
    ``str``, ``int`` (LSP's integer and uinteger; their ranges are lsprotocol's validators),
    ``float`` (decimal) or ``bool``. Must run before the converter structures anything:
    cattrs builds each class's structuring code once, with the hooks of that time."""
    for kind, hook in ((str, _strict_str), (int, _strict_int), (float, _strict_float),
                       (bool, _strict_bool)):
        converter.register_structure_hook(kind, hook)


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints.get(f.name, Any)) for f in attrs.fields(cls))


def _trusted(declared: Any, seen: frozenset = frozenset()) -> bool:
    """Whether :func:`strict_scalars`' hooks alone make any value structured as ``declared``
    fit it: a plain ``str``/``int``/``float``/``bool``, or an attrs class whose every field is
    trusted (a class met again inside itself is not)."""
    if declared in _SCALARS:
        return True
    if not (isinstance(declared, type) and attrs.has(declared)) or declared in seen:
        return False
    return all(_trusted(t, seen | {declared}) for _, t in _field_types(declared))


@functools.cache
def _checked_fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """The fields of ``cls`` whose values the structured params must still be checked in."""
    return tuple((name, t) for name, t in _field_types(cls) if not _trusted(t))


def _scalar_fits(value: Any, declared: Any) -> bool | None:
    """Whether scalar ``value`` fits ``declared``; ``None`` when ``declared`` says nothing
    about scalars (an object, an array) so the value cannot fit it."""
    if declared is Any or declared is object:
        return True
    origin = typing.get_origin(declared)
    if origin is typing.Union:
        return any(_scalar_fits(value, member) for member in typing.get_args(declared))
    if origin is typing.Literal:
        return any(type(value) is type(v) and value == v for v in typing.get_args(declared))
    if declared is type(None):
        return value is None
    if isinstance(declared, type) and issubclass(declared, enum.Enum):
        # An enum instance, or one of its raw values handed through by a union hook.
        return isinstance(value, declared) or any(
            type(value) is type(m.value) and value == m.value for m in declared)
    if declared is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if declared in _SCALARS:
        return type(value) is declared
    if isinstance(declared, typing.TypeVar) or isinstance(declared, typing.ForwardRef):
        return True
    return False


@functools.cache
def _none_fits(declared: Any) -> bool:
    return bool(_scalar_fits(None, declared))


def _problem(value: Any, declared: Any, depth: int = 0) -> list[str] | None:
    """How ``value`` breaks ``declared``, or ``None``: the complaint, then the path's parts
    from the innermost out (the path is spelt only for a value that breaks the schema)."""
    if depth > 64:  # JSON nesting is bounded by the framing layer; stop anyway
        return None
    if value is None:
        return None if _none_fits(declared) else [f"{_kind(value)} is not allowed here"]
    if isinstance(value, _SCALARS) and not isinstance(value, enum.Enum):
        if _scalar_fits(value, declared):
            return None
        return [f"{_kind(value)} is not allowed here"]
    found = None
    if attrs.has(type(value)):
        for name, field_type in _checked_fields(type(value)):
            found = _problem(getattr(value, name), field_type, depth + 1)
            if found:
                found.append(f".{name}")
                break
    elif isinstance(value, Sequence) and not isinstance(value, str):
        item_type = _item_type(declared, Sequence)
        for i, item in enumerate(value):
            found = _problem(item, item_type, depth + 1)
            if found:
                found.append(f"[{i}]")
                break
    elif isinstance(value, Mapping):
        item_type = _item_type(declared, Mapping)
        for key, item in value.items():
            found = _problem(item, item_type, depth + 1)
            if found:
                found.append(f".{key}")
                break
    return found


def _item_type(declared: Any, container: type) -> Any:
    """The element type of a sequence (or a mapping's value type) in ``declared``; ``Any``
    when ``declared`` does not say (LSPAny, a union of shapes)."""
    for member in typing.get_args(declared) if typing.get_origin(declared) is typing.Union \
            else (declared,):
        origin = typing.get_origin(member)
        if isinstance(origin, type) and issubclass(origin, container):
            args = typing.get_args(member)
            if args:
                return args[-1]
    return Any


def schema_problem_of(params: Any) -> str | None:
    """Where structured ``params`` hold a scalar their schema does not allow, or ``None``.
    Params that are not an lsprotocol class (Seam's own methods) are not checked here."""
    if not attrs.has(type(params)):
        return None
    found = _problem(params, type(params))
    if found is None:
        return None
    return "params" + "".join(reversed(found[1:])) + ": " + found[0]
