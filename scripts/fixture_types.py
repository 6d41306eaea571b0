"""Application types of the `apptypes` fixtures (scripts/gen_apptypes.py): a module of the
generator's own, outside LangGraph's safe set (SAFE_MSGPACK_TYPES of langgraph-checkpoint
4.3.2), so that strict deserialization needs an allowlist to revive them.

How JsonPlusSerializer stores each of them:

* ``Profile`` (pydantic v2 ``BaseModel``)        -> msgpack ext 5 ("fixture_types", "Profile", fields, "model_validate_json")
* ``Point`` (``@dataclass``)                      -> ext 2 ("fixture_types", "Point", {"x": …, "y": …})
* ``Color`` (``Enum``, neither str nor int)        -> ext 0 ("fixture_types", "Color", value)
* ``Span`` (``NamedTuple``)                        -> ext 2 ("fixture_types", "Span", {"start": …, "end": …})

``Color`` is a plain Enum on purpose: a ``str``/``int`` subclass would stay an inline JSONB
primitive in PostgresSaver's checkpoint and never reach the serializer.
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import NamedTuple, Optional

from pydantic import BaseModel


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int
    color: Optional[Color] = None


class Span(NamedTuple):
    start: int
    end: int


class Profile(BaseModel):
    name: str
    tags: list[str] = []
    level: int = 1
    since: Optional[datetime] = None


def add_points(left: Optional[list], right: Optional[list]) -> list:
    """A list reducer (``operator.add`` that tolerates ``None``)."""
    return list(left or []) + list(right or [])
