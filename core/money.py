"""Money as people read it. Amounts are ``int`` centavos everywhere else;
this is the one place that turns them into reais (admin pages, messages)."""

from __future__ import annotations


def brl(centavos: int) -> str:
    """``123456`` → ``R$ 1.234,56``; ``-1200`` → ``-R$ 12,00``."""
    sign = "-" if centavos < 0 else ""
    reais, cents = divmod(abs(centavos), 100)
    return f"{sign}R$ {reais:,}".replace(",", ".") + f",{cents:02d}"
