"""Counted nouns in the back office's pt-BR messages ("1 saque ignorado",
"3 saques ignorados"), never a hedged "saque" + "(s)"."""

from __future__ import annotations


def plural(count: int, one: str, many: str) -> str:
    """``one`` or ``many``, with ``{n}`` replaced by the count (replaced, not
    formatted: other braces are the caller's). Portuguese (CLDR, and Django's
    own pt_BR catalogue, which the rest of the admin speaks) takes the
    singular for 0 and 1."""
    return (one if abs(count) < 2 else many).replace("{n}", str(count))
