"""The API Pix's values, read and written the same way by every adapter:
amounts as decimal strings, RFC 3339 moments, end-to-end ids."""

from __future__ import annotations

import datetime as dt
import re

from acquirers.adapters.base import InvalidResponse

_VALOR = re.compile(r"^[0-9]{1,10}\.[0-9]{2}$")
#: A Pix's end-to-end id (``E`` + ISPB + moment + sequence): 32 alphanumerics.
E2E_ID = re.compile(r"^[a-zA-Z0-9]{32}$")


def valor(centavos: int) -> str:
    """Centavos as the API's decimal string (``1234`` → ``"12.34"``)."""
    if centavos < 0:
        raise ValueError("negative amount")
    return f"{centavos // 100}.{centavos % 100:02d}"


def centavos(text: object) -> int:
    """The API's decimal string as centavos; InvalidResponse if malformed."""
    if not isinstance(text, str) or not _VALOR.match(text):
        raise InvalidResponse(f"not an API Pix value: {text!r}")
    return int(text.replace(".", ""))


def parse_moment(text: object) -> dt.datetime | None:
    """An API Pix timestamp (RFC 3339; UTC when it names no offset), or None."""
    if not isinstance(text, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
