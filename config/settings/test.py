"""pytest. Same engines as production (embedded unless DATABASE_URL/REDIS_URL)."""

from .engines import *  # noqa: F403
from .engines import REDIS_URL, caches, env

DEBUG = False
# Fast hashing for the staff users tests create; API secrets use SHA-256 anyway.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
WEBHOOKS_ALLOW_PRIVATE_NETWORKS = True
PIX_SANDBOX = True
# As in production: staff fixtures sign in with a second factor (tests.helpers.staff_login).
ADMIN_OTP_REQUIRED = True
# E-mails stay in django.core.mail.outbox; claim links point at the test client's host.
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
PUBLIC_BASE_URL = "http://testserver"
# A transaction open across an acquirer call or a webhook delivery fails the test (core/connections.py).
DB_RELEASE_STRICT = True
LOGGING["root"]["level"] = env.str("LOG_LEVEL", default="WARNING")  # type: ignore[index]  # noqa: F405
CACHES = caches(REDIS_URL, prefix="pix-test")
# Lets two suites share one server (e.g. a second checkout) without clashing.
if env.str("PIX_TEST_DB_NAME", default=""):
    DATABASES["default"]["TEST"] = {"NAME": env.str("PIX_TEST_DB_NAME")}  # noqa: F405
