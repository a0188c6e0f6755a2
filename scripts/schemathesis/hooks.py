"""schemathesis hooks for scripts/test.sh (loaded through SCHEMATHESIS_HOOKS).

A new product's `ends_at` must be after its `starts_at`. The document says so in words
(`NewProduct.ends_at`), but JSON Schema cannot compare two fields, so schemathesis would send
schema-valid products with an empty sale window and count their `400` as a wrong rejection. This
teaches its generator the rule: a generated product whose two times are both well-formed and out
of order gets them swapped, or loses `ends_at` when they are equal.

The same for a waiting room's proof of work: `min_bits` must not be above `max_bits` (the
document says so in words, `NewPow.max_bits`); a generated pair out of order is swapped,
whole-number floats (`9.0`) included, which JSON Schema counts as integers.

(A product with a waiting room keeps its stock in one bucket: the document says that itself, in
`NewProduct.not`, so no hook bends those cases.)

Nothing else is changed, so a body meant to be invalid stays invalid.
"""

import re
from fractions import Fraction

import schemathesis

# RFC 3339 `date-time`, as the gateway (chrono) reads it.
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$"
)


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, 0 included)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _instant(value):
    """A sortable instant: (UTC minute, second within it). A leap second (`:60`) sorts within its
    minute, after `:59`, as chrono sorts it. None for anything else than a date-time."""
    if not isinstance(value, str):
        return None
    m = _DATE_TIME.match(value)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    minute = (_days_from_civil(y, mo, d) * 24 + h) * 60 + mi
    if m.group(9):
        offset = int(m.group(10)) * 60 + int(m.group(11))
        minute -= offset if m.group(9) == "+" else -offset
    fraction = Fraction(m.group(7) or "0")
    return (minute, s + fraction)


def _whole(value) -> bool:
    """A JSON Schema integer: an int, or a float with no fraction (`9.0`, which the gateway
    takes as 9), never a bool."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


@schemathesis.hook.apply_to(operation_id="createProduct")
def map_body(context, body):
    if isinstance(body, dict):
        starts, ends = _instant(body.get("starts_at")), _instant(body.get("ends_at"))
        if starts is not None and ends is not None and ends <= starts:
            body = dict(body)
            if ends == starts:
                del body["ends_at"]
            else:
                body["starts_at"], body["ends_at"] = body["ends_at"], body["starts_at"]
        room = body.get("waiting_room")
        pow_ = room.get("pow") if isinstance(room, dict) else None
        if isinstance(pow_, dict):
            lo, hi = pow_.get("min_bits"), pow_.get("max_bits")
            if all(_whole(b) for b in (lo, hi)) and lo > hi:
                body = dict(body)
                body["waiting_room"] = dict(room)
                body["waiting_room"]["pow"] = dict(pow_, min_bits=hi, max_bits=lo)
    return body


# Buys: each goes to the product test.sh made for them (ST_QTY_PRODUCT: sold up to 50 per
# buyer, a million units) as a buyer of its own, so that a buy's `quantity` is judged each
# time (a buyer holding an order gets it back, `200`, whatever quantity it asks): up to 50 the
# order is taken (`202`), above it `409 quantity_over_limit`. The buyer's token (HS256,
# ST_JWT_SECRET) replaces user 1's only where the case carries that valid token, so the cases
# about tokens stay as they were; a body naming user 1 names the new buyer.
import base64
import hashlib
import hmac
import itertools
import json
import os
import time

_BUYERS = itertools.count(1_000_000)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _token(user: int) -> str:
    now = int(time.time())
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = _b64(json.dumps({"sub": str(user), "iat": now, "exp": now + 3600}).encode())
    signed = f"{head}.{claims}".encode()
    key = os.environ["ST_JWT_SECRET"].encode()
    return f"{head}.{claims}.{_b64(hmac.new(key, signed, hashlib.sha256).digest())}"


# The buyer of each ticket a buy was answered with: a later call on the ticket (its poll, pay,
# cancel or stream, which the stateful phase follows from the buy's links) goes as its owner.
_OWNERS: dict = {}


def _as_buyer(case) -> bool:
    return "ST_JWT_SECRET" in os.environ and (case.headers or {}).get(
        "Authorization"
    ) == f"Bearer {os.environ['ST_BUYER_TOKEN']}"


@schemathesis.hook
def before_call(context, case, kwargs):
    if not _as_buyer(case):
        return
    if case.operation.label == "POST /v1/seckill/{product_id}":
        user = next(_BUYERS)
        case.headers["Authorization"] = f"Bearer {_token(user)}"
        if isinstance(case.body, dict) and case.body.get("user_id") == 1:
            case.body["user_id"] = user
        return
    ticket = (case.path_parameters or {}).get("ticket")
    if ticket in _OWNERS:
        case.headers["Authorization"] = f"Bearer {_token(_OWNERS[ticket])}"


@schemathesis.hook
def after_call(context, case, response):
    if case.operation.label != "POST /v1/seckill/{product_id}" or response.status_code not in (200, 201, 202):
        return
    try:
        body = response.json()
    except ValueError:
        return
    if isinstance(body, dict) and isinstance(body.get("ticket"), str):
        _OWNERS[body["ticket"]] = body.get("user_id")
