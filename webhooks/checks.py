"""System checks of the webhooks app (registered in ``WebhooksConfig.ready``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register()
def account_share_in_range(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    """An account's share of the webhook worker is a fraction of its threads:
    0 or less means nothing, and above 1 the cap is past the pool, so one
    account with receivers that hang could take every thread again."""
    share = float(settings.WEBHOOK_ACCOUNT_SHARE)
    if 0 < share <= 1:
        return []
    return [
        checks.Error(
            f"WEBHOOK_ACCOUNT_SHARE ({share}) is not in (0, 1].",
            hint="The default, 0.5, leaves half the webhook worker's threads to other accounts whatever one does.",
            id="webhooks.E001",
        )
    ]
