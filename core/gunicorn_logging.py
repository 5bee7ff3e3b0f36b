"""gunicorn's logger with the URL secrets taken out of its lines: the access
log's request line and the error log's "Error handling request <path>"
would otherwise print the acquirer notification token (see
:func:`core.logging.redact`). Set in ``config/gunicorn.conf.py``."""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from core.logging import RedactSecretsFilter


class RedactingLogger(Logger):
    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        # setup() runs again on every configuration reload: one filter each.
        for log in (self.error_log, self.access_log):
            if not any(isinstance(f, RedactSecretsFilter) for f in log.filters):
                log.addFilter(RedactSecretsFilter())
