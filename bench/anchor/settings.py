"""The anchor's settings: the least Django + DRF need to answer one JSON
read. No middleware (not even the security or common ones), no sessions,
auth, admin or messages, DEBUG off: a well-configured bare app, the
framework's own floor. The database is the service's bench database
(ANCHOR_DATABASE, else DATABASE_URL as bench_env() set it)."""

from __future__ import annotations

import json
import os
from typing import Any

import environ

DEBUG = False
SECRET_KEY = "bench-anchor-not-a-secret"  # noqa: S105 - signs nothing: no sessions, no CSRF
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "bench.anchor.urls"
WSGI_APPLICATION = "bench.anchor.wsgi.application"
INSTALLED_APPS = ["rest_framework"]
MIDDLEWARE: list[str] = []
USE_TZ = True
TIME_ZONE = "UTC"
USE_I18N = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _database() -> dict[str, Any]:
    # ANCHOR_DATABASE (bench/anchor/server.py): the service's own connection
    # settings, so the embedded PostgreSQL (a unix socket, no DATABASE_URL) works too.
    given = os.environ.get("ANCHOR_DATABASE")
    entry: dict[str, Any] = (
        {"ENGINE": "django.db.backends.postgresql", **json.loads(given)}
        if given
        else environ.Env.db_url_config(os.environ["DATABASE_URL"])
    )
    pool = int(os.environ.get("ANCHOR_DB_POOL") or 0)
    if pool:
        # A psycopg pool per process (the service's shape), for the gthread shapes' comparison.
        entry["OPTIONS"] = {**entry.get("OPTIONS", {}), "pool": {"min_size": pool, "max_size": pool}}
        entry["CONN_MAX_AGE"] = 0
    else:
        # One connection per thread, kept for the process's life and never
        # checked: the cheapest a bare app can be (bench/anchor/server.py, SHAPE).
        entry["CONN_MAX_AGE"] = None
    entry["CONN_HEALTH_CHECKS"] = False
    entry["ATOMIC_REQUESTS"] = False
    return entry


DATABASES = {"default": _database()}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_THROTTLE_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "rest_framework.negotiation.DefaultContentNegotiation",
    # No django.contrib.auth: an unauthenticated request's user is None.
    "UNAUTHENTICATED_USER": None,
    "UNAUTHENTICATED_TOKEN": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    # Its 404 (the health check's) is an answer, not a warning.
    "loggers": {"django.request": {"level": "ERROR"}},
}
