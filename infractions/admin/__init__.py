"""Back office for MED infractions: the queue and each infraction's page
(``queue``), the defence and request pages it opens (``pages``), and the
requests a second staff member decides (``requests``). Importing registers
them."""

from infractions.admin import queue, requests

__all__ = ["queue", "requests"]
