"""Schemathesis hooks for .ci/schemathesis.sh.

Event times (`ts`) and `publishedAt` are valid only inside a window around
the server's clock (the retention behind, `max_future_secs` or a year
ahead), which a static OpenAPI document cannot state; the document says so
in words. Generated non-negative integers are moved to "now" here, so that
a valid request stays valid; negative or non-integer values (the invalid
ones) are left as generated.

A `cursor` is valid only if this server issued it (it names a ranking
snapshot), which no pattern can state either: generated positive cases
drop it; the stateful phase passes real ones from `RankingPage.cursor`.
"""
import time

import schemathesis


def _now_if_plain_integer(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if value < 0 or value != int(value):
        return value
    return int(time.time())


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    meta = case.meta
    positive = meta is not None and meta.generation.mode.value == "positive"
    if positive and meta.phase.name.value != "stateful" and case.query:
        case.query.pop("cursor", None)
    body = case.body
    if isinstance(body, dict):
        for key in ("ts", "publishedAt"):
            if key in body:
                body[key] = _now_if_plain_integer(body[key])
