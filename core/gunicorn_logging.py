"""gunicorn's logger with the URL secrets taken out of its lines: the access
log's request line and the error log's "Error handling request <path>"
would otherwise print the acquirer notification token (see
:func:`core.logging.redact`). Set in ``config/gunicorn.conf.py``.

Static files served without error are not access-logged: a page of the
admin or of Swagger UI fetches a dozen, which buried ``make run``'s banner
(its keys) under lines nobody reads. Their errors are still logged.

A response cut by the send timeout (a CSV export whose client stopped
reading, :mod:`core.exports`) is one warning line, not gunicorn's "Socket
error processing request." with a traceback: it is the timeout doing its
job, and a merchant's stalled script would otherwise fill the error log."""

from __future__ import annotations

import sys
from typing import Any

from gunicorn.glogging import Logger

from core.logging import RedactSecretsFilter

#: settings.STATIC_URL as a path (the logger does not load Django's settings).
STATIC_PREFIX = "/static/"


#: gunicorn's message for an error on a client's socket.
SOCKET_ERROR = "Socket error processing request."
SEND_TIMEOUT_WARNING = "client stopped reading: connection cut after the send timeout (EXPORT_SEND_TIMEOUT)"


class RedactingLogger(Logger):
    def exception(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if msg == SOCKET_ERROR and isinstance(sys.exc_info()[1], TimeoutError):
            self.warning(SEND_TIMEOUT_WARNING)
            return
        super().exception(msg, *args, **kwargs)

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        if str(environ.get("PATH_INFO", "")).startswith(STATIC_PREFIX) and int(resp.status_code) < 400:
            return
        super().access(resp, req, environ, request_time)

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        # setup() runs again on every configuration reload: one filter each.
        for log in (self.error_log, self.access_log):
            if not any(isinstance(f, RedactSecretsFilter) for f in log.filters):
                log.addFilter(RedactSecretsFilter())
