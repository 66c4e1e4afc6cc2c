"""Domain dataclasses to JSON and back, for values kept in Redis (cached answers).

JSON rather than pickle: whoever can write to a shared Redis must not be able to run code in every replica. The
decoder is driven by the dataclass's type hints (dataclasses, enums, tuples, string-keyed dicts, optional values,
datetimes as ISO 8601, str/int/float/bool), which covers `ragsvc.domain.Answer` and everything in it; anything else
is refused at encode time.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import json
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")
_PLAIN = (str, int, float, bool, type(None))


def encode(value: Any) -> bytes:
    return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":")).encode()


def decode(data: bytes | str, cls: type[T]) -> T:
    """The `cls` that `encode` wrote; ValueError (or TypeError/KeyError) when `data` is not one."""
    value = _typed(json.loads(data), cls)
    if not isinstance(value, cls):
        raise ValueError(f"not a {cls.__name__}")
    return value


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, _PLAIN):
        return value
    raise TypeError(f"cannot encode a {type(value).__name__}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _typed(value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None
        options = [option for option in typing.get_args(hint) if option is not type(None)]
        return _typed(value, options[0])
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_typed(element, item) for element in value)
    if origin is dict:
        item = typing.get_args(hint)[1]
        return {key: _typed(element, item) for key, element in value.items()}
    if hint is datetime.datetime:
        return datetime.datetime.fromisoformat(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = _hints(hint)
        return hint(**{name: _typed(item, hints[name]) for name, item in value.items()})
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value
