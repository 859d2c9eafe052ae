"""Reading requests and writing answers: size limits, UTF-8, JSON, bearer tokens."""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import re
from typing import Any, TypeVar

import msgspec
import orjson
from starlette.datastructures import QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.types import Receive, Scope

from tidings.api.beside import beside, decoded
from tidings.errors import ErrorCode, TidingsError
from tidings.model import CONTAINERS, children, convert
from tidings.networks import address_key

T = TypeVar("T")
MAX_DEPTH = 1024  # nesting a body may have, as orjson reads JSON (fields allow far less)
# arrays and objects (maps) a body may hold: each costs its checks a few microseconds, so a
# body of millions (1.9 M in 3.8 MB of MessagePack) cost seconds of CPU even beside the loop
MAX_CONTAINERS = 262_144


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it passes `limit` bytes."""
    return await receive_body(request.scope, request.receive, limit)


async def receive_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The same, read from the ASGI channel (the publish route is a pure ASGI endpoint)."""
    declared = header(scope, b"content-length")
    if declared.isdigit() and int(declared) > limit:
        raise TidingsError(ErrorCode.PAYLOAD_TOO_LARGE, size=int(declared), limit=limit)
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            raise TidingsError(ErrorCode.INVALID_JSON, detail="the request ended early")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TidingsError(ErrorCode.PAYLOAD_TOO_LARGE, size=f"more than {limit}", limit=limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def header(scope: Scope, name: bytes) -> str:
    """A request header's value (the first, if repeated), or ""."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def parse_json(body: bytes, *, allow_empty: bool = False) -> Any:
    """The body as JSON: UTF-8, no duplicate keys (I-JSON, RFC 7493), no integer past 64 bits
    (as in MessagePack), at most `MAX_CONTAINERS` arrays and objects, nothing orjson refuses
    (NaN, nesting past 1,024 levels)."""
    if not body.strip():
        if allow_empty:
            return {}
        raise TidingsError(ErrorCode.INVALID_JSON, detail="the body is empty")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise TidingsError(ErrorCode.INVALID_UTF8) from None
    try:
        value = decoded(orjson.loads, body)
    except orjson.JSONDecodeError as exc:
        raise TidingsError(ErrorCode.INVALID_JSON, detail=str(exc)) from None
    kept = _keys_kept(value)
    if not _none_repeated(body, kept) and _keys_written(body) != kept:
        raise duplicate_key(body)
    digits = body.translate(_DIGITS_AS_ZERO)
    if (_TWENTY_DIGITS in digits or _MINUS_NINETEEN in digits) and _maybe_wide(body, digits):
        _refuse_wide_integers(body)  # rare: then numbers are read again
    return value


# Every string literal in valid JSON, and whether a colon follows it (then it is a key):
# matched left to right, one literal after another, a quote is never taken for an opening one.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?')


# orjson reads an integer past 64 bits as a float, silently changing it: one is refused as
# MessagePack refuses it. Such an integer has 20 digits, or 19 after a minus (-2^63-1; 19
# digits alone are below 10^19 < 2^64, as a nanosecond timestamp is); a body without such a
# run (nearly all) is not read again. Found by a translation and substring searches, all in
# C: a regular expression for the run took longer than orjson's decoding.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else b if b == 0x2D else 0x20 for b in range(256))
_NINETEEN_DIGITS = b"0" * 19
_TWENTY_DIGITS, _MINUS_NINETEEN = b"0" * 20, b"-" + _NINETEEN_DIGITS
_RUN_END = re.compile(rb"[^0]")
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')
_INT_RANGE = range(-(2**63), 2**64)


def _maybe_wide(body: bytes, digits: bytes) -> bool:
    """Whether a run of 19 digits or more (`digits`: `body` translated) may be an integer
    outside [-2^63, 2^64): each run alone, without reading the body left to right (a batch
    with a 20-digit number in each publication took the walk below for all, 5% of a
    broker's time publishing). A run followed by a fraction or an exponent is no integer;
    one inside a string may pass for one, and then the walk decides."""
    at = digits.find(_NINETEEN_DIGITS)
    while at >= 0:
        found = _RUN_END.search(digits, at)
        end = len(body) if found is None else found.start()
        if body[end : end + 1] not in (b".", b"e", b"E"):
            if end - at > 20:  # past 2^64's 20 digits (and never a long int() to read)
                return True
            value = int(body[at:end])
            if (-value if at and body[at - 1] == _MINUS else value) not in _INT_RANGE:
                return True
        at = digits.find(_NINETEEN_DIGITS, end)
    return False


_MINUS = ord("-")


def _refuse_wide_integers(body: bytes) -> None:
    """Reads a valid JSON body's literals left to right (a string whole, so digits in it are
    not a number) and refuses the first integer outside [-2^63, 2^64), naming the last key
    written before it."""
    key = b""
    for token in _TOKEN.finditer(body):
        text = token[0]
        if token[1]:  # a string with a colon after it: a key
            key = text[: text.rindex(b'"') + 1]
        elif text.lstrip(b"-").isdigit() and (len(text) > 21 or int(text) not in _INT_RANGE):
            field = str(orjson.loads(key)) if key else None
            raise TidingsError(ErrorCode.INVALID_JSON, field=field, detail="integer past 64 bits")


_QUOTE_SPACE = (b'" ', b'"\t', b'"\n', b'"\r')


def _none_repeated(body: bytes, kept: int) -> bool:
    """True: no object of this valid JSON body repeats a key (orjson kept `kept` keys);
    False: unknown, the keys are read one by one (2.3 us a publication in a batch, issue
    #30). Each key written is followed by its colon, so the colons are at least as many as
    the keys written, which are at least as many as those kept. Where no quote is followed
    by whitespace, a key's closing quote is followed by its colon at once, so the same
    holds of the quotes followed by a colon (colons in strings, a payload's time of day,
    are not counted). Either as many as the keys kept: none was lost."""
    if body.count(b":") == kept:
        return True
    return not any(q in body for q in _QUOTE_SPACE) and body.count(b'":') == kept


def _keys_written(body: bytes) -> int:
    found = _STRING.findall(body)
    return len(found) - found.count(b"")


def _keys_kept(value: Any) -> int:
    """Keys of every object in the decoded value (orjson keeps the last of duplicates);
    refused past `MAX_CONTAINERS` arrays and objects."""
    count, containers, level = 0, 0, [value] if isinstance(value, CONTAINERS) else []
    while level:  # a level at a time, as `model.json_depth`
        containers += len(level)
        if containers > MAX_CONTAINERS:
            raise too_many_containers()
        count += sum(len(x) for x in level if isinstance(x, dict))
        level = [c for c in children(level) if isinstance(c, CONTAINERS)]
    return count


def too_many_containers() -> TidingsError:
    return TidingsError(
        ErrorCode.LIMIT_EXCEEDED,
        field="$",
        detail=f"a body holds at most {MAX_CONTAINERS:,} arrays and objects (maps)",
    )


def duplicate_key(body: bytes) -> TidingsError:
    """The error naming the first duplicated key (read again, slowly: only on this path)."""
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()  # linear: a body of 60,000 keys took minutes as a list scan
        for key, _ in items:
            if key in seen:
                found.append(key)
            seen.add(key)
        return dict(items)

    with contextlib.suppress(ValueError, RecursionError):
        json.loads(body, object_pairs_hook=pairs)
    key = found[0] if found else "?"
    return TidingsError(ErrorCode.INVALID_JSON, field=key, detail=f"duplicate key {key!r}")


MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")


def is_msgpack(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in MSGPACK_TYPES


def parse_msgpack(body: bytes) -> Any:
    """A MessagePack body (publications only, docs/api.md): maps keyed by strings; `bin`
    values stay bytes (the publish path takes them as a publication's binary `data`).
    Refused as JSON would be: strings that are not UTF-8, duplicate keys, nesting past
    `MAX_DEPTH`, more than `MAX_CONTAINERS` arrays and maps, NaN and infinities, integers
    past 64 bits; and what JSON cannot say: extension types, the timestamp extension
    included."""
    try:
        value = decoded(msgspec.msgpack.decode, body)
    except msgspec.DecodeError as exc:
        raise TidingsError(ErrorCode.INVALID_MSGPACK, detail=str(exc)) from None
    except UnicodeDecodeError:  # a string that is not UTF-8: refused as in a JSON body
        raise TidingsError(ErrorCode.INVALID_UTF8) from None
    except RecursionError:  # the decoder's own bound, below orjson's 1,024 levels
        raise TidingsError(ErrorCode.INVALID_MSGPACK, detail="nested too deeply") from None
    problem = _msgpack_problem(value)
    if problem is not None:
        raise TidingsError(ErrorCode.INVALID_MSGPACK, detail=problem)
    key = _duplicate_packed_key(body)
    if key is not None:
        raise TidingsError(ErrorCode.INVALID_MSGPACK, field=key, detail=f"duplicate key {key!r}")
    return value


# How MessagePack's first byte of an item reads (github.com/msgpack/msgpack/blob/master/spec.md):
# bytes that follow it whatever the value; bytes of a length, then that many bytes (bin, str,
# ext, whose type byte is counted in `_EXT`); bytes of a count of items (array, map).
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_FIXED |= {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
_SIZED = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC7: 1, 0xC8: 2, 0xC9: 4}
_EXT = {0xC7, 0xC8, 0xC9}
_ARRAY, _MAP = {0xDC: 2, 0xDD: 4}, {0xDE: 2, 0xDF: 4}
# fixints, nil, false, true and the empty map and array: an item in one byte
_ONE_BYTE_ITEMS = re.compile(rb"[\x00-\x80\x90\xc0\xc2\xc3\xe0-\xff]+")


def _duplicate_packed_key(body: bytes) -> str | None:
    """The first key written twice in one map of a body msgspec decoded (so well formed,
    keys strings), or None. msgspec keeps the last of duplicates and has no hook to see
    them: the body is walked once, an item at a time, a set of keys per open map."""
    at = 0
    open_: list[tuple[list[int], set[str] | None]] = [([1], None)]  # items left; a map's keys
    while open_:
        left, keys = open_[-1]
        if left[0] == 0:
            open_.pop()
            continue
        run = _ONE_BYTE_ITEMS.match(body, at) if keys is None else None
        if run is not None:  # in an array, a run of whole one-byte items: passed over in C
            skipped = min(run.end() - at, left[0])
            at, left[0] = at + skipped, left[0] - skipped
            continue
        is_key = keys is not None and left[0] % 2 == 0
        left[0] -= 1
        b = body[at]
        if b <= 0x7F or b >= 0xE0 or b in _FIXED:
            at += 1 + _FIXED.get(b, 0)
        elif b <= 0x8F or b in _MAP:
            at, n = _count(body, at, b, 0x8F, _MAP)
            open_.append(([2 * n], set()))
        elif b <= 0x9F or b in _ARRAY:
            at, n = _count(body, at, b, 0x9F, _ARRAY)
            open_.append(([n], None))
        else:
            start, n = _count(body, at, b, 0xBF, _SIZED)
            start += b in _EXT
            at = start + n
            if is_key and keys is not None:
                key = body[start:at].decode()
                if key in keys:
                    return key
                keys.add(key)
    return None


def _count(body: bytes, at: int, b: int, fixed_max: int, sized: dict[int, int]) -> tuple[int, int]:
    """Where an item's content starts, and its count or length (in the first byte's low bits
    up to `fixed_max`, else in the big-endian bytes `sized` says)."""
    if b <= fixed_max:
        return at + 1, b & (0x0F if fixed_max < 0xBF else 0x1F)
    size = sized[b]
    return at + 1 + size, int.from_bytes(body[at + 1 : at + 1 + size])


def _msgpack_problem(value: Any) -> str | None:
    """What JSON could not say in a decoded body. A container at a time, its items' types
    gathered in C: a Python step per item (4 M one-byte items in a 4 MiB batch) held the
    event loop 4 s."""
    if not isinstance(value, CONTAINERS):
        return _scalar_problem({type(value)}, [value])
    level, depth, containers = [value], 1, 0
    while level:
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        containers += len(level)
        if containers > MAX_CONTAINERS:
            raise too_many_containers()
        deeper: list[Any] = []
        for container in level:
            items = list(container.values()) if isinstance(container, dict) else container
            if isinstance(container, dict) and set(map(type, container)) - {str}:
                return "map keys must be strings"
            kinds = set(map(type, items))
            if kinds <= _PLAIN:
                continue
            problem = _scalar_problem(kinds, items)
            if problem is not None:
                return problem
            deeper += [item for item in items if isinstance(item, CONTAINERS)]
        level, depth = deeper, depth + 1
    return None


_PLAIN = {str, int, bool, type(None), bytes}  # what needs no look past its type


def _scalar_problem(kinds: set[type], items: list[Any]) -> str | None:
    if any(issubclass(k, msgspec.msgpack.Ext | datetime.datetime) for k in kinds):
        return "extension types (the timestamp too) are refused"
    if float in kinds and not all(math.isfinite(x) for x in items if type(x) is float):
        return "NaN and infinities are refused, as in JSON"
    return None


def parse_body(body: bytes, content_type: str, *, allow_empty: bool = False) -> Any:
    """JSON, or MessagePack when the content type says so."""
    if is_msgpack(content_type):
        return parse_msgpack(body)
    return parse_json(body, allow_empty=allow_empty)


async def json_body(request: Request, limit: int, *, allow_empty: bool = False) -> Any:
    """The body as JSON (read beside the event loop when it is large, `tidings.api.beside`)."""
    body = await read_body(request, limit)
    return await beside(len(body), lambda: parse_json(body, allow_empty=allow_empty))


def bearer(request: HTTPConnection) -> str | None:
    """The token of `Authorization: Bearer <token>`, or None."""
    return _bearer(request.headers.get("authorization", ""))


def scope_bearer(scope: Scope) -> str | None:
    """`bearer` for a pure ASGI endpoint (no request object)."""
    return _bearer(header(scope, b"authorization"))


SIMULATION_HEADER = "Tidings-Simulation"  # a simulator's calls carry its run's name
SIMULATION_NAME_MAX = 100
_SIMULATION = SIMULATION_HEADER.lower().encode()


def scope_simulation(scope: Scope) -> str | None:
    """The simulation a call says it is part of (`Tidings-Simulation`), or None. Heard only
    from this machine (the console's simulator, `tidings sim` beside the broker): from
    elsewhere, a client could hide its subscribers among the simulated ones and out of the
    operator's list of real ones."""
    name = header(scope, _SIMULATION).strip()
    if not name:
        return None
    client = scope.get("client")
    if client and not address_key(str(client[0]))[1]:
        return None
    if len(name) > SIMULATION_NAME_MAX:
        raise TidingsError(
            ErrorCode.INVALID_FIELD,
            field=SIMULATION_HEADER,
            detail=f"a simulation's name has at most {SIMULATION_NAME_MAX} characters",
        )
    return name


def _bearer(value: str) -> str | None:
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def body_as(
    request: Request, into: type[T], limit: int, *, allow_empty: bool = False
) -> tuple[Any, T]:
    """The body, as decoded JSON and as the type that validates it."""
    body = await read_body(request, limit)

    def read() -> tuple[Any, T]:
        raw = parse_json(body, allow_empty=allow_empty)
        return raw, convert(raw, into)

    return await beside(len(body), read)


def query_as(request: Request, into: type[T]) -> T:
    """The query parameters as the type that validates them (numbers from their text)."""
    return scope_query_as(request.scope, into)


def scope_query_as(scope: Scope, into: type[T]) -> T:
    """`query_as` for a pure ASGI endpoint: from the scope's query string."""
    return convert(dict(QueryParams(scope.get("query_string", b""))), into, strict=False)


def base_url(request: HTTPConnection, public_url: str) -> str:
    return public_url.rstrip("/") if public_url else str(request.base_url).rstrip("/")
