"""Schemathesis hooks for .ci/schemathesis.sh.

Event times (`ts`) and `publishedAt` are valid only inside a window around
the server's clock (the retention behind, `max_future_secs` or a year
ahead), which a static OpenAPI document cannot state; the document says so
in words. Generated non-negative integers are moved to "now" here, so that
a valid request stays valid; negative or non-integer values (the invalid
ones) are left as generated.

Ids of people (`visitorId`, `userId`, `poster`) are 1-128 bytes of UTF-8,
which JSON Schema's `maxLength` (code points) cannot state either:
longer generated strings are cut to 128 bytes at a character boundary.

A curation `until` is valid only after the server's clock (and at most ten
years ahead): a generated non-negative integer becomes an hour from now.

A `cursor` is valid only if this server issued it (it names a ranking
snapshot), which no pattern can state either: generated positive cases
drop it; the stateful phase passes real ones from `RankingPage.cursor`.

A webhook's `url` is valid only if it parses as a receiver URL and names
no private address (`webhooks.allow_private = false`), which a pattern
cannot state: generated positive cases get `https://hooks.invalid/hotrank`
(the `.invalid` TLD never resolves, so no delivery leaves the machine).
The parameters only some models take (`window`, `baseline`, `min` with
`rising`; `decay`, `halfLife` with `gravity` and `weighted`) are dropped
from a positive case's `query`: the schema cannot tie them to `model`.
"""
import time

import schemathesis


def _plain_integer(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value >= 0 and value == int(value)


def _now_if_plain_integer(value):
    return int(time.time()) if _plain_integer(value) else value


_BYTE_LIMITED = ("visitorId", "userId", "poster")


def _cut_to_128_bytes(value):
    if not isinstance(value, str):
        return value
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) <= 128:
        return value
    return raw[:128].decode("utf-8", "ignore") or "x"


def _cut_ids(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _BYTE_LIMITED:
                node[key] = _cut_to_128_bytes(value)
            else:
                _cut_ids(value)
    elif isinstance(node, list):
        for item in node:
            _cut_ids(item)


def _hours(value):
    """Hours of a `6h` / `2d` duration, else None."""
    if not isinstance(value, str) or len(value) < 2 or not value[:-1].isdigit():
        return None
    return int(value[:-1]) * {"h": 1, "d": 24}.get(value[-1], 0) or None


def _only_the_models_params(query):
    """Leaves the parameters only some models read on the models that read
    them, and in the combinations the server takes (the schema can state
    neither): `window`, `baseline`, `min` with rising (window + baseline
    within the 192 hours kept hour by hour); `decay`, `halfLife` with
    gravity and weighted, `halfLife` with `decay=halflife` only."""
    model = query.get("model", "gravity")
    if model != "rising":
        for key in ("window", "baseline", "min"):
            query.pop(key, None)
    else:
        span = (_hours(query.get("window", "1h")) or 0) + (_hours(query.get("baseline", "24h")) or 0)
        if span > 192:
            query.pop("window", None)
            query.pop("baseline", None)
    if model not in ("gravity", "weighted"):
        query.pop("decay", None)
        query.pop("halfLife", None)
    elif query.get("decay") == "halflife":
        query.setdefault("halfLife", "6h")
    else:
        query.pop("halfLife", None)


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    meta = case.meta
    positive = meta is not None and meta.generation.mode.value == "positive"
    negative = meta is not None and meta.generation.mode.value == "negative"
    if positive and meta.phase.name.value != "stateful" and case.query:
        case.query.pop("cursor", None)
    if not negative and isinstance(case.query, dict):
        _only_the_models_params(case.query)
    body = case.body
    # Safe in every mode: no schema bounds these ids' length, so a cut
    # turns no invalid case into a valid one.
    _cut_ids(body)
    if positive and isinstance(body, dict) and "url" in body and "secret" in body:
        body["url"] = "https://hooks.invalid/hotrank"
        if isinstance(body.get("query"), dict):
            for key in ("window", "baseline", "min", "decay", "halfLife"):
                body["query"].pop(key, None)
    if isinstance(body, dict):
        for key in ("ts", "publishedAt"):
            if key in body:
                body[key] = _now_if_plain_integer(body[key])
        if _plain_integer(body.get("until")):
            body["until"] = int(time.time()) + 3600
