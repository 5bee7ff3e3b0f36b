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


@checks.register()
def cap_below_charge_pool(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    """The per-acquirer cap must be below the charge pool: at or above it, one
    slow acquirer's calls fill a process's whole pool, and a charge whose
    chain has other, healthy acquirers is refused as busy there too."""
    cap, pool = int(settings.ACQUIRER_MAX_IN_FLIGHT), int(settings.OUTBOUND_POOL_CHARGE)
    if cap < pool:
        return []
    return [
        checks.Warning(
            f"ACQUIRER_MAX_IN_FLIGHT ({cap}) is not below OUTBOUND_POOL_CHARGE ({pool}): one slow acquirer "
            "can take every charge slot of a process, and charges to the other acquirers fail as busy.",
            hint="Keep ACQUIRER_MAX_IN_FLIGHT below OUTBOUND_POOL_CHARGE (the defaults are 48 and 56).",
            id="acquirers.W001",
        )
    ]
