"""Development: `make run`. Embedded engines unless DATABASE_URL/REDIS_URL."""

from .engines import *  # noqa: F403
from .engines import env

DEBUG = env.bool("DEBUG", default=True)
# Webhooks to localhost receivers are normal while developing.
WEBHOOKS_ALLOW_PRIVATE_NETWORKS = env.bool("WEBHOOKS_ALLOW_PRIVATE_NETWORKS", default=True)
# The demo's acquirers are sandbox ones (decisions §8).
PIX_SANDBOX = env.bool("PIX_SANDBOX", default=True)
# Staff's second factor is opt-in here, so `make run`'s demo admin signs in
# with its password alone; a member who enrols is asked for codes as in
# production (which forces it on). ADMIN_OTP_REQUIRED=true tries the whole flow.
ADMIN_OTP_REQUIRED = env.bool("ADMIN_OTP_REQUIRED", default=False)
# E-mails (credential claim links) are printed by the web process, not sent.
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
# Where claim links point: this machine's server (`make run` sets it from PORT).
PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default="http://127.0.0.1:8000")
