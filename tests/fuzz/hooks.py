"""Schemathesis hooks of the fuzz run (``hooks`` in schemathesis.toml)."""

from __future__ import annotations

import itertools
from typing import Any

import schemathesis

# As api.idempotency has them (decisions §7); not imported from there,
# which needs Django set up, and this runs inside schemathesis.
HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255

_sequence = itertools.count()


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
