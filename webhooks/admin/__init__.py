"""Back office for webhooks: endpoints (``endpoints``), and events with
their deliveries and attempts (``events``). Importing registers them."""

from webhooks.admin import endpoints, events

__all__ = ["endpoints", "events"]
