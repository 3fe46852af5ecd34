"""``Record``: the base of every model dataclass, written and read from its fields.

``to_dict`` writes the fields in declaration order: those named in the class's ``CONTRACT``
always (``None`` where unknown), every other one only when it carries something (not None, [],
{} or False; an ``Optional[bool]`` is three-valued, so its False is written), so snapshots stay
small and diff-friendly.  ``from_dict`` reads that back, and older documents too: an absent key
takes the field's default, an unknown key is ignored, a list field reads null as [], a flag reads
any value as a bool.  A field typed as another Record (or a list of them) is written and read
through that class.  A field whose key is a Python keyword is named with a trailing underscore
(``from_`` is the key ``"from"``).  Fields named in ``TRANSIENT`` live only in memory (what
acquisition hands the analysis, caches): declared like the others, never written nor read.

Runs inside gdb: standard library only, Python 3.8.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type, TypeVar

R = TypeVar("R", bound="Record")

# How a field is written and read (see _codec).
_PLAIN = 0  # as it is
_RECORD = 1  # a Record: through its to_dict / from_dict
_RECORDS = 2  # a list of Records
_LIST = 3  # a list of plain values: null reads as []
_FLAG = 4  # a bool: any value reads as a bool
_TRISTATE = 5  # an Optional[bool]: None unknown, False written

#: (field name, JSON key, how, Record class or None, Optional[...]) per field, in declaration order.
_Codec = List[Tuple[str, str, int, Optional[type], bool]]
_CODECS: Dict[type, _Codec] = {}


def _is_record(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Record)


def _how(hint: Any) -> Tuple[int, Optional[type], bool]:
    optional = False
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = True
        hint = args[0] if len(args) == 1 else Any
    if typing.get_origin(hint) is list:
        item = (typing.get_args(hint) or (Any,))[0]
        if _is_record(item):
            return _RECORDS, item, optional
        return (_PLAIN if optional else _LIST), None, optional
    if _is_record(hint):
        return _RECORD, hint, optional
    if hint is bool:
        return (_TRISTATE if optional else _FLAG), None, optional
    return _PLAIN, None, optional


#: Annotations read as plain values; ``bool`` is a flag unless Optional.
_PLAIN_NAMES = frozenset({"str", "int", "float", "Any"})


def _named(name: str, names: Dict[str, Any]) -> Tuple[bool, Optional[type]]:
    """(known, the Record class) of an annotation that is one name; unknown names are (False, None)."""
    if name in _PLAIN_NAMES or "[" in name:
        return True, None  # a generic (List[str], Dict[..]) is no Record
    obj = names.get(name)
    if obj is None:
        return False, None
    return True, (obj if _is_record(obj) else None)


def _how_text(text: str, names: Dict[str, Any]) -> Optional[Tuple[int, Optional[type], bool]]:
    """``_how`` of an annotation's text for the forms the model writes (a name, Optional[..],
    List[..], Dict[..], Tuple[..]), without ``typing.get_type_hints`` evaluating every annotation
    (start-up time, issue 21); None for any other form (then ``get_type_hints`` decides)."""
    t = text.replace(" ", "")
    optional = t.startswith("Optional[") and t.endswith("]")
    if optional:
        t = t[9:-1]
    if t.startswith("List[") and t.endswith("]"):
        known, sub = _named(t[5:-1], names)
        if not known:
            return None
        if sub is not None:
            return _RECORDS, sub, optional
        return (_PLAIN if optional else _LIST), None, optional
    if (t.startswith("Dict[") or t.startswith("Tuple[")) and t.endswith("]"):
        return _PLAIN, None, optional
    if t == "bool":
        return (_TRISTATE if optional else _FLAG), None, optional
    if not t.isidentifier():
        return None
    known, sub = _named(t, names)
    if not known:
        return None
    return (_RECORD if sub is not None else _PLAIN), sub, optional


def _codec(cls: type) -> _Codec:
    codec = _CODECS.get(cls)
    if codec is None:
        fields = [f for f in dataclasses.fields(cls) if f.name not in cls.TRANSIENT]
        own = cls.__dict__.get("__annotations__", {})
        module = sys.modules.get(cls.__module__)
        names = vars(module) if module is not None else {}
        hows = [_how_text(f.type, names) if isinstance(f.type, str) and f.name in own else None for f in fields]
        if any(h is None for h in hows):
            hints = typing.get_type_hints(cls)
            hows = [_how(hints[f.name]) for f in fields]
        codec = [(f.name, _key(f.name)) + h for f, h in zip(fields, hows)]  # type: ignore[operator]
        _CODECS[cls] = codec
    return codec


def _key(name: str) -> str:
    """The JSON key of a field: ``from_`` (``from`` is a keyword) is ``"from"``."""
    return name[:-1] if name.endswith("_") else name


def _carries(v: Any) -> bool:
    return v is not None and v != [] and v != {} and v is not False


def _read(value: Any, how: int, sub: Optional[type], optional: bool) -> Any:
    if how == _RECORD:
        if optional:
            return None if value is None or value == {} else sub.from_dict(value)  # type: ignore[union-attr]
        return sub.from_dict(value or {})  # type: ignore[union-attr]
    if how == _RECORDS:
        return [sub.from_dict(x) for x in value or []]  # type: ignore[union-attr]
    if how == _LIST:
        return list(value or [])
    if how == _FLAG:
        return bool(value)
    return value


def recordclass(cls: Type[R]) -> Type[R]:
    """``@dataclass`` for the model: ``__init__`` generated, ``__repr__`` and ``__eq__`` the one pair
    ``Record`` defines (the same text and the same comparison).  The stdlib compiles each generated
    method separately: two fewer of them per class are ~8 ms of every run's start (issue 21)."""
    return dataclasses.dataclass(repr=False, eq=False)(cls)


def _compared(cls: type) -> Tuple[str, ...]:
    names = _COMPARED.get(cls)
    if names is None:
        names = _COMPARED[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return names


_COMPARED: Dict[type, Tuple[str, ...]] = {}


class Record:
    """Mixin of the model's dataclasses: serialisation from the fields."""

    __hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as @dataclass leaves it

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _compared(type(self))
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__qualname__, ", ".join(
            "%s=%r" % (f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.repr))

    #: Keys written even when empty (the ``hanganalyze/1`` contract of this object).
    CONTRACT: ClassVar[Tuple[str, ...]] = ()
    #: Fields that live only in memory, between the reader and the analysis (never written).
    TRANSIENT: ClassVar[Tuple[str, ...]] = ()

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for name, key, how, _sub, _optional in _codec(type(self)):
            if name in self.TRANSIENT:
                continue  # before reading it: a transient record is never converted
            v = getattr(self, name)
            if how == _RECORD and v is not None:
                v = v.to_dict()
            elif how == _RECORDS:
                v = [x.to_dict() for x in v]
            if name in self.CONTRACT or _carries(v) or (how == _TRISTATE and v is False):
                out[key] = v
        return out

    @classmethod
    def from_dict(cls: Type[R], d: Dict[str, Any]) -> R:
        if not isinstance(d, dict):
            raise TypeError("%s: expected an object, got %s" % (cls.__name__, type(d).__name__))
        kwargs = {name: _read(d[key], how, sub, optional)
                  for name, key, how, sub, optional in _codec(cls) if key in d}
        return cls(**kwargs)
