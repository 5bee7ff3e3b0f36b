"""Staff's sign-in to the back office: django-axes' login throttling and
django-otp's second factor. Part of ``base`` (which star-imports it), kept
apart so each file stays readable."""

from __future__ import annotations

import datetime as dt

import environ

env = environ.Env()  # base has read .env into the environment by now

# --------------------------------------------------------------------------- admin login throttling (django-axes)
# Failed staff logins are counted in the database per username and client
# address together: after ADMIN_LOGIN_FAILURE_LIMIT failures that pair is
# refused, right password included, for ADMIN_LOGIN_COOLOFF_MINUTES. The pair
# (not the username alone) so nobody can lock a colleague out from elsewhere.
# The address is REMOTE_ADDR, or behind the TLS proxy (TRUST_X_FORWARDED_PROTO)
# the one it appends to X-Forwarded-For: see core.admin.signin.login_client_address.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env.float("ADMIN_LOGIN_COOLOFF_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.admin.signin.login_client_address"
# Failures during a lockout do not extend it: the cool-off ends on time.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_TEMPLATE = "admin/locked_out.html"
# A wrong second-factor code is a failed login too (staff/views.py): never keep what was typed.
AXES_SENSITIVE_PARAMETERS = ["otp_token"]

# --------------------------------------------------------------------------- staff second factor (django-otp)
# Every staff member signs in with a password and then a TOTP code from an
# authenticator app, or one of their single-use recovery codes (staff/,
# observability.admin_site); a member without one enrols at their first
# sign-in. Only local settings (`make run`) may turn the requirement off;
# production settings refuse to start with it off.
ADMIN_OTP_REQUIRED = env.bool("ADMIN_OTP_REQUIRED", default=True)
# django-otp's own throttle: after n wrong codes in a row a device checks no
# code for 2^(n-1) seconds. On top, ADMIN_LOGIN_FAILURE_LIMIT wrong codes in a
# row lock the second step for ADMIN_LOGIN_COOLOFF_MINUTES (staff.selectors).
OTP_TOTP_THROTTLE_FACTOR = 1
OTP_STATIC_THROTTLE_FACTOR = 1

# --------------------------------------------------------------------------- staff sessions
# Sessions are the back office's alone: the API authenticates every request by
# its keys, and the claim page by the link's token. A staff session ends
# SESSION_COOKIE_AGE seconds after it was last written (its sign-in, in
# practice) and when the browser closes, rather than after Django's two weeks.
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=12 * 60 * 60)
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
