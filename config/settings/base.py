"""Settings shared by every environment. Everything configurable comes from
the environment through one ``env`` object; every variable is listed in
``.env.example``."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured

from core.logging import logging_config
from core.redis import celery_broker_url

# Lets code write admin.ModelAdmin[Account] and friends at runtime, as typed.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
# A developer's .env is read if present; real environments set variables.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env("SECRET_KEY", default="dev-insecure-secret-key-change-me")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    # Django's admin with the back office's site (overview on the index, pt-BR names).
    "observability.apps.PixAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    # Staff sign-in's second factor: TOTP devices and recovery codes (static tokens).
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "api.apps.ApiConfig",
    "accounts",
    "acquirers",
    "payments",
    "withdrawals",
    "infractions",
    "due_charges",
    "recurrences",
    "reconciliation",
    "webhooks",
    "provisioning",
    "staff",
]

MIDDLEWARE = [
    # Outermost: the latency it records includes every other middleware.
    "core.metrics.MetricsMiddleware",
    "core.middleware.RequestIdMiddleware",
    # Before anything reads the body: an oversized one is a 413, never read.
    "core.middleware.RequestBodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Everywhere, as Django's deploy checks expect: API views are csrf_exempt
    # (key-authenticated, no cookies), so on them it only reads a cookie.
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # SITE_MIDDLEWARE, for everything but the key-authenticated API, which
    # needs none of it (static files, sessions, Django auth, messages, axes).
    "core.middleware.SiteOnlyMiddleware",
]
SITE_MIDDLEWARE = [
    # Serves admin and Swagger UI assets from gunicorn: no CDN, no nginx needed.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Which second factor, if any, verified this session (request.user.is_verified()).
    "django_otp.middleware.OTPMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into its page.
    "axes.middleware.AxesMiddleware",
]
# The admin's and django-axes' checks look for their middleware in MIDDLEWARE
# only; core.middleware.check_site_middleware checks SITE_MIDDLEWARE instead.
SILENCED_SYSTEM_CHECKS = ["admin.E408", "admin.E409", "admin.E410", "axes.W002"]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --------------------------------------------------------------------------- engines
# DATABASE_URL / REDIS_URL name the servers. Base never starts anything:
# unset, local and test settings (``engines``) fill both in with the embedded
# engines (same PostgreSQL and Redis, from wheels, under ./var); production
# refuses to start without them.


def database(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """DATABASES with ``entry`` as the default, as every process uses it."""
    # A process started by the tests (a real Celery worker) joins the test database.
    if env.str("PIX_DATABASE_NAME", default=""):
        entry["NAME"] = env.str("PIX_DATABASE_NAME")
    entry["ATOMIC_REQUESTS"] = False
    # libpq's URL names a socket directory percent-encoded (postgres://u@%2Fvar%2Frun%2Fpostgresql/db),
    # which django-environ passes on as written.
    entry["HOST"] = urllib.parse.unquote(entry.get("HOST") or "")
    # Each process (gunicorn worker, Celery worker, manage.py, pytest) keeps a
    # psycopg pool of up to DB_POOL_MAX_SIZE connections, opened on first use
    # (after gunicorn's fork: never preload the app). Connections go back to it
    # at the end of every request and task, so a Celery worker on threads no
    # longer opens a connection per task. Size it to the threads of one process
    # (WEB_THREADS, the worker's concurrency): past it they queue, up to
    # DB_POOL_TIMEOUT seconds. 0 turns pooling off: persistent connections kept
    # DB_CONN_MAX_AGE seconds instead, checked before each request's first query.
    if DB_POOL_MAX_SIZE > 0:
        entry["OPTIONS"] = {
            **entry.get("OPTIONS", {}),
            "pool": {
                "min_size": 1,
                "max_size": DB_POOL_MAX_SIZE,
                "timeout": env.float("DB_POOL_TIMEOUT", default=10.0),
            },
        }
        # Django refuses persistent connections beside a pool: the pool is the persistence.
        entry["CONN_MAX_AGE"] = 0
        # No dead connection is handed out after a PostgreSQL restart or a
        # terminated backend, but not at a round trip per checkout (Django's
        # health check on a pool, about 8% of a GET): core.postgresql hands
        # out a connection when its socket has nothing to read, which is so
        # for a live idle one, and checks with a query only the others.
        entry["CONN_HEALTH_CHECKS"] = False
    else:
        entry["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
        # A persistent connection is checked before each request's first query.
        entry["CONN_HEALTH_CHECKS"] = True
    # Django's PostgreSQL backend, with that cheaper pool checkout (core/postgresql).
    if entry.get("ENGINE") == "django.db.backends.postgresql":
        entry["ENGINE"] = "core.postgresql"
    return {"default": entry}


def caches(url: str, prefix: str = "pix") -> dict[str, dict[str, Any]]:
    return {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": prefix}
    }


DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=8)
# Every outbound call (acquirer, webhook receiver) first gives the thread's
# connection back (core/connections.py); one made inside a transaction is a bug that
# is logged, and raised when this is on (the tests turn it on).
DB_RELEASE_STRICT = env.bool("DB_RELEASE_STRICT", default=False)
DATABASES = database(env.db_url("DATABASE_URL")) if env.str("DATABASE_URL", default="") else {}
REDIS_URL = env.str("REDIS_URL", default="")
CACHES = caches(REDIS_URL)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --------------------------------------------------------------------------- i18n / time
# pt-br: DRF's own field messages reach clients, and clients read Portuguese.
LANGUAGE_CODE = "pt-br"
USE_I18N = True
# Stored in UTC; everything shown to clients is America/Sao_Paulo (decisions §1).
TIME_ZONE = "America/Sao_Paulo"
USE_TZ = True
# The back office's dates to the second (config/formats/pt_BR). The API's own
# format is REST_FRAMEWORK["DATETIME_FORMAT"], which this does not touch.
FORMAT_MODULE_PATH = ["config.formats"]

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "var" / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Without collectstatic (tests, a first `make run`), serve from the apps' folders.
WHITENOISE_USE_FINDERS = True

ADMIN_URL = env.str("ADMIN_URL", default="admin/")

# --------------------------------------------------------------------------- staff sign-in
# django-axes' login throttling and django-otp's second factor: config/settings/signin.py.
from .signin import *  # noqa: E402, F403

# --------------------------------------------------------------------------- API
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.DenyAll"],
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.JSONObjectParser",
        "api.parsers.AnyContentJSONObjectParser",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "api.negotiation.JSONFirstNegotiation",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.CredentialRateThrottle"],
    "DATETIME_FORMAT": "%Y-%m-%d %H:%M:%S",
    "UNAUTHENTICATED_USER": None,
    # Responses are always JSON; `?format=` belongs to endpoints (the QR code's png/svg).
    "URL_FORMAT_OVERRIDE": None,
    # OPTIONS is a 405 (api.base.API_METHODS); never the framework's description of a view.
    "DEFAULT_METADATA_CLASS": None,
}

# The OpenAPI schema (drf-spectacular): config/settings/openapi.py.
from .openapi import SPECTACULAR_SETTINGS as SPECTACULAR_SETTINGS  # noqa: E402

# --------------------------------------------------------------------------- Celery
CELERY_BROKER_URL = celery_broker_url(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
# Bulkheads: webhook deliveries (and their relay) and payout runs (sends and
# status lookups) each have a queue, and a worker, of their own (Procfile,
# compose, make run): a receiver that stalls holds only webhook slots, an
# acquirer that stalls only payout slots, and neither delays expiry or
# reconciliation. Every other task, beat's payout poller included (it only
# scans and enqueues), goes to the default queue.
WEBHOOK_QUEUE = env.str("WEBHOOK_QUEUE", default="webhooks")
PAYOUT_QUEUE = env.str("PAYOUT_QUEUE", default="payouts")
CELERY_TASK_ROUTES = {
    "webhooks.tasks.*": {"queue": WEBHOOK_QUEUE},
    "withdrawals.tasks.process_withdrawal": {"queue": PAYOUT_QUEUE},
}
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
# Money-moving work: a task is acknowledged only once done, so a worker that
# dies mid-task leaves it to be redone (tasks are idempotent).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600),
    # A publish during a broker outage fails at once instead of retrying for
    # seconds inside a request: the outbox row is committed and the relay sends it.
    "max_retries": 0,
}
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Retention, in days (LGPD: payer data is not kept for ever). Inbound
# notifications are deleted (not one still waiting to be processed); webhook
# attempts keep their rows and lose their response bodies; idempotency keys
# go after this many days, never within their 24 h replay window.
RETENTION_DAYS_INBOUND_NOTIFICATIONS = env.int("RETENTION_DAYS_INBOUND_NOTIFICATIONS", default=90)
RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES = env.int("RETENTION_DAYS_WEBHOOK_ATTEMPT_BODIES", default=30)
RETENTION_DAYS_IDEMPOTENCY_KEYS = env.int("RETENTION_DAYS_IDEMPOTENCY_KEYS", default=1)
# Local state (embedded engines, beat's schedule); the production image makes /app/var.
VAR_DIR = Path(env.str("PIX_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --------------------------------------------------------------------------- product
# The sandbox acquirer and /api/sandbox/* let a credential pay its own charges:
# off unless a settings module turns it on (local, test); production refuses it.
PIX_SANDBOX = env.bool("PIX_SANDBOX", default=False)
PLATFORM_NAME = env.str("PLATFORM_NAME", default="PIX Service")
# How staff's authenticator apps name this back office.
OTP_TOTP_ISSUER = PLATFORM_NAME
SERVICE_VERSION = "1.0.0"
# Requests per credential per minute (decisions §7); 0 turns the limit off.
API_RATE_LIMIT_PER_MINUTE = env.int("API_RATE_LIMIT_PER_MINUTE", default=600)
# CSV exports (core/exports.py). At most this many exports of one credential
# are sent at once, across every process (429 past it; 0: no cap): each holds
# a web thread for as long as its client reads. A write of an export (API or
# back office) that the client does not take within EXPORT_SEND_TIMEOUT
# seconds cuts the connection, freeing the thread (gunicorn; at least 1).
API_EXPORTS_PER_CREDENTIAL = env.int("API_EXPORTS_PER_CREDENTIAL", default=3)
EXPORT_SEND_TIMEOUT = env.float("EXPORT_SEND_TIMEOUT", default=30.0)
if EXPORT_SEND_TIMEOUT < 1:
    # Refused at load, not by a system check (gunicorn never runs them): with
    # no timeout a stalled export blocks its thread forever, and its slot's
    # lease ends meanwhile, so the per-credential cap stops counting it.
    raise ImproperlyConfigured(
        f"EXPORT_SEND_TIMEOUT={EXPORT_SEND_TIMEOUT} must be at least 1 second: an export whose client "
        "stops reading is cut after it. The default is 30."
    )
# Credentials with their accounts, and acquirer chains, are read from
# per-process snapshots dropped on every write (core/snapshots.py); this is
# how old one may be at most, whatever happens to Redis. 0 turns them off.
SNAPSHOT_TTL_SECONDS = env.float("SNAPSHOT_TTL_SECONDS", default=1.0)
# The longest a request may run: gunicorn's timeout (config/gunicorn.conf.py
# reads the same variable) and how long an Idempotency-Key stays "in flight"
# before a retry may take over a claim whose request died.
WEB_TIMEOUT = env.int("WEB_TIMEOUT", default=60)
# Largest request body under /api/ (bytes, by Content-Length; past it a 413, before it is read), and
# the routes that take more: a MED defence's files, 5 MB decoded, under 7 MiB in base64 with its text.
# Django's own cap on a body read into memory (DATA_UPLOAD_MAX_MEMORY_SIZE) follows the largest.
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=256 * 1024)
API_MAX_BODY_BYTES_BY_PATH = {
    r"^/api/infractions/[^/]+/defense$": 7 * 1024 * 1024,
    # A batch of 1,000 due-date charges is about 500 KB.
    r"^/api/due-charges/batches$": 2 * 1024 * 1024,
    # A batch of 1,000 payouts with the longest keys, references and documents is about 300 KB.
    r"^/api/withdrawals/batches$": 1024 * 1024,
}
DATA_UPLOAD_MAX_MEMORY_SIZE = max(API_MAX_BODY_BYTES, *API_MAX_BODY_BYTES_BY_PATH.values())

# --------------------------------------------------------------------------- operations
# /metrics is off (404) until a token is set; scrapers send it as a Bearer token.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Workers beat into this Redis sorted set; readiness wants one younger than MAX_AGE.
WORKER_HEARTBEAT_KEY = env.str("WORKER_HEARTBEAT_KEY", default="pix:workers")
WORKER_HEARTBEAT_INTERVAL = env.float("WORKER_HEARTBEAT_INTERVAL", default=10.0)
WORKER_HEARTBEAT_MAX_AGE = env.float("WORKER_HEARTBEAT_MAX_AGE", default=30.0)

# --------------------------------------------------------------------------- outbound
# Circuit breaker, bulkheads, payouts, webhooks: config/settings/outbound.py;
# beat's periodic work and the measured conversion: config/settings/schedule.py.
from .outbound import *  # noqa: E402, F403
from .schedule import *  # noqa: E402, F403

# E-mail, claim links and segregation of duties: config/settings/staff.py.
from .staff import *  # noqa: E402, F403

WEBHOOK_USER_AGENT = f"PixService-Webhook/{SERVICE_VERSION}"

# Merchant city written in BR Codes by the sandbox acquirer (field 60).
PIX_MERCHANT_CITY = env.str("PIX_MERCHANT_CITY", default="SAO PAULO")

# --------------------------------------------------------------------------- logging
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOG_FORMAT = env.str("LOG_FORMAT", default="text")  # "json" in production


LOGGING = logging_config(LOG_FORMAT, LOG_LEVEL)
