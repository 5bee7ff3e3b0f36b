"""What the apps' OpenAPI examples share (each app keeps its own beside its
views: ``payments/examples.py``, ``withdrawals/examples.py``,
``acquirers/examples.py``, ``webhooks/examples.py``). Values here are valid
as they stand, since Swagger UI's "Try it out" sends them to the demo of
``make run``."""

from __future__ import annotations

#: A CPF whose check digits are right (the classic documentation example):
#: a charge's payer and a withdrawal's key.
CPF = "52998224725"
