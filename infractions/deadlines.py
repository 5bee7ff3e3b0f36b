"""Placeholder: the deadline notices' module is another change's (issue 31)."""

from __future__ import annotations

import datetime as dt


def deadline_notices_send(*, now: dt.datetime | None = None) -> int:
    return 0
