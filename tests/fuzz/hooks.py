"""Schemathesis hooks of the fuzz run (``hooks`` in schemathesis.toml)."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import schemathesis
from hypothesis import strategies as st

# As api.idempotency has them (decisions §7); not imported from there,
# which needs Django set up, and this runs inside schemathesis.
HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255

_sequence = itertools.count()

#: As api.schema has it (a test holds them equal): the API's timestamps,
#: ``YYYY-MM-DD HH:mm:ss``. Generated as real calendar times, every year from 1
#: to 9999 (the filters refuse anything else, and that refusal is tested apart).
TIMESTAMP_FORMAT = "local-datetime"
TIMESTAMPS = st.datetimes(min_value=dt.datetime(1, 1, 1)).map(
    lambda moment: (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
)
schemathesis.openapi.format(TIMESTAMP_FORMAT, TIMESTAMPS)


@schemathesis.hook
def before_call(context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]) -> None:
    """Make every valid ``Idempotency-Key`` unique.

    Generated keys repeat ("0", "a"), and the same key with another body is a
    422 by design (decisions §7): left alone, most generated bodies would stop
    there instead of reaching the services. A key the contract refuses (empty,
    over 255 characters) is left as it is, to be refused."""
    key = case.headers.get(HEADER) if case.headers else None
    if isinstance(key, str) and 1 <= len(key) <= MAX_KEY_LENGTH:
        suffix = f"-{next(_sequence)}"
        case.headers[HEADER] = key[: MAX_KEY_LENGTH - len(suffix)] + suffix
