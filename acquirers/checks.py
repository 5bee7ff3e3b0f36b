"""System checks of the acquirers app (registered in ``AcquirersConfig.ready``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def sandbox_off(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    """``check --deploy`` refuses the sandbox whatever the settings module:
    it lets any credential mark its own charges paid (production settings
    refuse it at import already)."""
    if not settings.PIX_SANDBOX:
        return []
    return [
        checks.Error(
            "PIX_SANDBOX is on: the sandbox acquirer and /api/sandbox/* let any credential mark its own charges paid.",
            hint="Set PIX_SANDBOX=false in every deployed environment.",
            id="acquirers.E001",
        )
    ]
