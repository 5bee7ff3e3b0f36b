"""Production: compose / real deployments. Refuses to start half-configured."""

import os
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

# Checked before base is imported: production never runs on the embedded
# engines (base leaves the servers unset without these; only local and test
# settings fill them in).
_missing = [name for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY") if not os.environ.get(name)]
if _missing:
    raise ImproperlyConfigured(
        f"production settings need {', '.join(_missing)} in the environment. They are the settings of every "
        "process that does not name its own (DJANGO_SETTINGS_MODULE unset); for development, `make run` names "
        "config.settings.local, or set DJANGO_SETTINGS_MODULE=config.settings.local in the shell"
    )

from core.logging import logging_config  # noqa: E402

from .base import *  # noqa: E402, F403
from .base import env  # noqa: E402

DEBUG = False
SECRET_KEY = env.str("SECRET_KEY")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS")
WEBHOOKS_ALLOW_PRIVATE_NETWORKS = False
if env.bool("PIX_SANDBOX", default=False):
    # Checked here rather than only by a system check: gunicorn and Celery
    # never run system checks, and the sandbox mints money.
    raise ImproperlyConfigured(
        "PIX_SANDBOX must be off in production: the sandbox acquirer and /api/sandbox/* let any "
        "credential mark its own charges paid. Set PIX_SANDBOX=false."
    )
PIX_SANDBOX = False
if not env.bool("ADMIN_OTP_REQUIRED", default=True):
    # A console that moves money never opens on a password alone.
    raise ImproperlyConfigured(
        "ADMIN_OTP_REQUIRED must be on in production: staff sign in to the back office with a second "
        "factor (TOTP). Remove ADMIN_OTP_REQUIRED=false."
    )
ADMIN_OTP_REQUIRED = True
if EMAIL_BACKEND.rsplit(".", 2)[-2] in ("console", "filebased", "locmem", "dummy"):  # noqa: F405
    # Such a backend prints, files, keeps or drops what it is given: a
    # credential's claim link would land in logs staff read, or nowhere.
    raise ImproperlyConfigured(
        f"EMAIL_BACKEND={EMAIL_BACKEND!r} does not send e-mail: production sends credential claim links "  # noqa: F405
        "through SMTP (EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD)."
    )
_public = urlsplit(PUBLIC_BASE_URL)  # noqa: F405
if _public.scheme != "https" or not _public.hostname:
    # Claim links are built from it alone (never from a request's Host, which
    # a client can forge): without it no credential could be delivered, and
    # over http a link's token would cross the network in the clear.
    raise ImproperlyConfigured(
        f"PUBLIC_BASE_URL={PUBLIC_BASE_URL!r} is not an https:// address: production needs the public "  # noqa: F405
        "https:// address where merchants open the credential claim links e-mailed to them "
        "(PUBLIC_BASE_URL=https://pix.example.com)."
    )

# X-Forwarded-Proto is believed only when a proxy in front sets it (and drops
# a client's); with gunicorn reachable directly, any client could claim https.
TRUST_X_FORWARDED_PROTO = env.bool("TRUST_X_FORWARDED_PROTO", default=False)
if TRUST_X_FORWARDED_PROTO:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
# Probes and the metrics scraper speak plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^api/health(/ready)?$", r"^metrics$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

LOGGING = logging_config(env.str("LOG_FORMAT", default="json"), env.str("LOG_LEVEL", default="INFO"))
