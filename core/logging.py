"""Request id propagation into every log line, and redaction of the secrets
a URL may carry (the acquirer notification token, a credential's claim
token) from every log line."""

from __future__ import annotations

import logging
import re
import traceback
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

request_id_var: ContextVar[str] = ContextVar("request_id", default="-")

#: What replaces a secret in a log line.
REDACTED = "[redacted]"
# The segment after .../acquirers/{key}/notifications/ is the secret an API Pix
# PSP was registered with (acquirers/urls.py). Matched anywhere in a line: a
# request line, a bare path, an absolute URL, Django's "Not Found: <path>".
_NOTIFICATION_TOKEN = re.compile(r"(/acquirers/[^/\s?#\"']+/notifications/)[^/\s?#\"']+")
# The segment after /resgatar-credencial/ is a credential's one-time claim
# token (accounts.credential_links): whoever reads it first gets the secret.
_CLAIM_TOKEN = re.compile(r"(/resgatar-credencial/)[^/\s?#\"']+")


def redact(text: str) -> str:
    """``text`` with every URL secret replaced by :data:`REDACTED`."""
    return _CLAIM_TOKEN.sub(rf"\g<1>{REDACTED}", _NOTIFICATION_TOKEN.sub(rf"\g<1>{REDACTED}", text))


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` (``-`` outside a request) so formatters can use it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        return True


class RedactingFormatter(logging.Formatter):
    """The project's text lines, redacted whole: message, trace and extras,
    whoever logged them (Django's request logger prints the path)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingJsonFormatter(JsonFormatter):
    """The project's JSON lines, redacted whole (see :class:`RedactingFormatter`)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(str(super().format(record)))


class RedactSecretsFilter(logging.Filter):
    """For loggers whose formatters are not ours (gunicorn's access and error
    logs): rewrites the record's message, and formats its trace once,
    redacted, where standard formatters take it from (``exc_text``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report, not ours
            return True
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def logging_config(fmt: str, level: str) -> dict[str, object]:
    """Django's LOGGING for ``fmt`` ("text" or "json") at ``level``."""
    # Both redact URL secrets (acquirer notification tokens) from the whole line.
    formatters: dict[str, dict[str, object]] = {
        "text": {
            "()": "core.logging.RedactingFormatter",
            "fmt": "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s",
        },
        "json": {
            "()": "core.logging.RedactingJsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "core.logging.RequestIdFilter"}},
        "formatters": formatters,
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": fmt, "filters": ["request_id"]},
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Django's own request logger would print the 500's trace a second
            # time; our handler logs it once, with the request id.
            "django.request": {"level": "ERROR", "propagate": True},
            # Django's defaults give these their own handlers (a plain console
            # one when DEBUG is on, runserver's request lines) that would print
            # a notification URL's token: ours, which redact it, are the only ones.
            "django": {"handlers": [], "propagate": True},
            "django.server": {"handlers": [], "propagate": True},
            "pgserver": {"level": "WARNING"},
        },
    }
