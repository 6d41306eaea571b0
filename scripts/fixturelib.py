"""Shared helpers for the dfck fixture / perf scripts.

The renderer turns a Python value into the JSON shape defined by the value-rendering
table of ``dfck inspect <THREAD> --state`` (docs/storage-format.md#json-rendering). It does not
look at Python objects directly: every value is first serialized with LangGraph's own
``JsonPlusSerializer().dumps_typed`` and the resulting msgpack bytes are rendered by a
small generic msgpack -> JSON walker. That way the expected JSON is exactly what a
store-only (Rust) reader sees after decoding the stored bytes.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

_SERDE = JsonPlusSerializer()
_PICKLE_SERDE = JsonPlusSerializer(pickle_fallback=True)

INTERNAL_PREFIXES = ("__", "branch:", "start:")


class _Ext:
    """An undecoded msgpack ext value: (code, raw payload bytes)."""

    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def _ext_hook(code: int, data: bytes) -> _Ext:
    return _Ext(code, data)


def _unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_ext_hook, option=ormsgpack.OPT_NON_STR_KEYS)


def _b64(b: bytes) -> str:
    return base64.b64encode(bytes(b)).decode("ascii")


def _render_float(f: float) -> Any:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def _render_key(k: Any) -> Any:
    return render_decoded(k)


def render_decoded(v: Any) -> Any:
    """Render a value produced by ``_unpack`` (msgpack data model + _Ext)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return _render_float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$bytes": _b64(v)}
    if isinstance(v, (list, tuple)):
        return [render_decoded(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {k: render_decoded(x) for k, x in v.items()}
        return {"$map": [[_render_key(k), render_decoded(x)] for k, x in v.items()]}
    if isinstance(v, _Ext):
        return _render_ext(v)
    raise TypeError(f"unexpected decoded msgpack value {type(v)!r}")


def _render_ext(e: _Ext) -> Any:
    code = e.code
    try:
        payload = _unpack(e.data)
    except Exception:  # not a msgpack document: opaque
        return {"$ext": code, "$bytes": _b64(e.data)}
    if code == 7:
        return {"$delta_snapshot": render_decoded(payload)}
    if code == 6 and isinstance(payload, list) and len(payload) >= 4:
        dtype, shape, order, buf = payload[:4]
        return {
            "$ndarray": {
                "dtype": render_decoded(dtype),
                "shape": render_decoded(shape),
                "order": render_decoded(order),
                "$bytes": _b64(buf),
            }
        }
    if code in (0, 1, 2, 3, 4, 5) and isinstance(payload, list) and len(payload) >= 3:
        cls = f"{payload[0]}.{payload[1]}"
        if code in (4, 5):
            fields = payload[2]
            out: dict[str, Any] = {"$class": cls}
            if isinstance(fields, dict) and all(isinstance(k, str) for k in fields):
                for k, x in fields.items():
                    out[k] = render_decoded(x)
            else:  # should not happen for pydantic models; keep it visible
                out["$fields"] = render_decoded(fields)
            return out
        if code == 0:
            return {"$class": cls, "$arg": render_decoded(payload[2])}
        if code == 1:
            return {"$class": cls, "$args": render_decoded(payload[2])}
        if code == 2:
            return {"$class": cls, "$kwargs": render_decoded(payload[2])}
        if code == 3:
            method = payload[3] if len(payload) > 3 else None
            return {"$class": cls, "$method": render_decoded(method), "$arg": render_decoded(payload[2])}
    return {"$ext": code, "$bytes": _b64(e.data)}


def render_msgpack(data: bytes) -> Any:
    """Render one complete msgpack document."""
    return render_decoded(_unpack(data))


def render_typed(typ: str, data: bytes) -> Any:
    """Render a (type, bytes) pair as produced by ``dumps_typed``."""
    if typ == "null":
        return None
    if typ in ("bytes", "bytearray"):
        return {"$bytes": _b64(data)}
    if typ == "msgpack":
        return render_msgpack(data)
    if typ == "pickle":
        # Not readable without Python; the fixture generator lists such values in "errors".
        return {"$pickle": _b64(data)}
    raise ValueError(f"cannot render serializer type {typ!r}")


def render_value(v: Any) -> Any:
    """Render one Python channel value via LangGraph's serializer.

    Values msgpack cannot encode (e.g. ints beyond 64 bits) are rendered from their
    ``pickle_fallback`` encoding as ``{"$pickle": b64}``; a Rust reader cannot read
    those (they are listed in the fixture's "errors")."""
    try:
        typ, data = _SERDE.dumps_typed(v)
    except Exception:
        typ, data = _PICKLE_SERDE.dumps_typed(v)
    return render_typed(typ, data)


def is_internal_channel(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIXES)


def render_values(values: dict[str, Any]) -> dict[str, Any]:
    """Render a get_state ``values`` mapping channel by channel, in order, dropping
    internal channels."""
    return {k: render_value(v) for k, v in values.items() if not is_internal_channel(k)}


def message_digest_list(messages: list[Any]) -> list[tuple[str, str]]:
    """(id, content) pairs; handy for perf checks."""
    return [(getattr(m, "id", None), getattr(m, "content", None)) for m in messages]
