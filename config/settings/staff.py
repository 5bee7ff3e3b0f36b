"""Settings of e-mail and of the rules that keep one staff member from
moving a merchant's money out (README, "Money safety"). Part of ``base``
(which star-imports it), kept apart so each file stays readable."""

from __future__ import annotations

import environ

env = environ.Env()  # base has read .env into the environment by now

# --------------------------------------------------------------------------- e-mail and the insider rules
# Django's e-mail framework. Production sends through SMTP (these variables);
# local settings print e-mails on the console (`make run`), tests keep them in
# memory (django.core.mail.outbox). Production refuses a backend that would
# print or file an e-mail (a credential's claim link would land in logs).
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=587)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=True)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
# The SMTP conversation's deadline (seconds): a staff request sending a link waits at most this.
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=10.0)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="PIX Service <nao-responda@localhost>")
# E-mails being sent at once per process; past it staff are told to try again (core.bulkhead).
EMAIL_MAX_IN_FLIGHT = env.int("EMAIL_MAX_IN_FLIGHT", default=4)
# Where merchants open the links e-mailed to them (https://pix.example.com).
# Never taken from a request: its Host header is the client's to forge, and a
# link built from it would carry a credential's token to the forger. Production
# refuses to start without an https:// one; local and test settings give the
# local server's address; unset, no link is sent.
PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default="")
# How long a credential's claim link works (docs/operations/back-office.md, "Credentials by claim link").
CREDENTIAL_LINK_HOURS = env.float("CREDENTIAL_LINK_HOURS", default=24.0)
# Segregation of duties: whoever issued or rotated a credential that can cash
# out, or asked for or approved a change of the contact e-mail, of an account
# cannot approve that account's withdrawals for this many days.
STAFF_SEGREGATION_DAYS = env.int("STAFF_SEGREGATION_DAYS", default=30)
