"""Settings of the service's outbound side: the acquirers' circuit breaker,
the bulkheads, payouts and webhook deliveries. Part of ``base`` (which
star-imports it), kept apart so each file stays readable."""

from __future__ import annotations

import environ

env = environ.Env()  # base has read .env into the environment by now

# --------------------------------------------------------------------------- acquirer health
# One circuit breaker per acquirer, shared through Redis (acquirers/breaker.py).
# Failures are unavailability (unavailable, timeout, invalid answer, adapter
# error); a decline is an answer and never counts. Off: every acquirer is
# always tried and nothing is recorded.
ACQUIRER_BREAKER_ENABLED = env.bool("ACQUIRER_BREAKER_ENABLED", default=True)
# Opens after this many failures in a row...
ACQUIRER_BREAKER_FAILURES = env.int("ACQUIRER_BREAKER_FAILURES", default=5)
# ...or when this share of the calls of the last WINDOW seconds failed, once
# there were MIN_CALLS of them (an acquirer failing most calls, not in a row).
ACQUIRER_BREAKER_FAILURE_RATE = env.float("ACQUIRER_BREAKER_FAILURE_RATE", default=0.5)
ACQUIRER_BREAKER_WINDOW = env.int("ACQUIRER_BREAKER_WINDOW", default=60)
ACQUIRER_BREAKER_MIN_CALLS = env.int("ACQUIRER_BREAKER_MIN_CALLS", default=20)
# Seconds an open acquirer is skipped before one probe call is let through.
ACQUIRER_BREAKER_COOLDOWN = env.float("ACQUIRER_BREAKER_COOLDOWN", default=30.0)
# Recent calls kept per acquirer: the failure rate's window and the admin's
# success rate and p50/p95 latency.
ACQUIRER_HEALTH_SAMPLES = env.int("ACQUIRER_HEALTH_SAMPLES", default=200)

# --------------------------------------------------------------------------- bulkheads
# Bounded pools of outbound acquirer calls, per process (acquirers/capacity.py):
# the bound per deployment is processes x cap. When a pool or an acquirer's cap
# is full the call is not made (outcome "busy"): a charge's chain passes the
# acquirer over, a payout or a lookup is tried again shortly. Charge creation
# (web); payout sends and status lookups; reconciliation, refunds and cancels.
# The charge pool is above the per-acquirer cap (below): one slow acquirer at
# its cap leaves charge slots for the others (acquirers.W001 checks it); and
# below a web process's threads (WEB_THREADS, 64), leaving some to reads.
OUTBOUND_POOL_CHARGE = env.int("OUTBOUND_POOL_CHARGE", default=56)
OUTBOUND_POOL_PAYOUT = env.int("OUTBOUND_POOL_PAYOUT", default=32)
OUTBOUND_POOL_RECONCILE = env.int("OUTBOUND_POOL_RECONCILE", default=16)
# Calls in flight to one acquirer from one process, whatever their purpose: a
# slow acquirer holds at most this many threads, the rest go elsewhere.
ACQUIRER_MAX_IN_FLIGHT = env.int("ACQUIRER_MAX_IN_FLIGHT", default=48)

# --------------------------------------------------------------------------- payouts
# Minutes an acquirer whose send was unclear is asked again (and, on "not
# found", sent the same payout again under the same id) before the payout
# goes to staff's queue of undetermined payouts. It never goes elsewhere meanwhile.
PAYOUT_SETTLE_WINDOW_MINUTES = env.int("PAYOUT_SETTLE_WINDOW_MINUTES", default=30)
# Payout runs whose worker process died under them (a pool child killed) before
# the withdrawal is held for staff ("processamento interrompido") instead of
# being run again: a payout that kills its worker every time stops there.
PAYOUT_MAX_LOST_RUNS = env.int("PAYOUT_MAX_LOST_RUNS", default=3)
# The payee check (withdrawals.payees, docs/api/payee-check.md): seconds a
# key's owner found in the DICT is reused (cache, and the result stored on a
# withdrawal reused at its send); seconds before a check nobody could answer
# is tried again; minutes of such unclear checks before the withdrawal fails.
PAYEE_LOOKUP_CACHE_SECONDS = env.int("PAYEE_LOOKUP_CACHE_SECONDS", default=900)
PAYEE_LOOKUP_RETRY_SECONDS = env.int("PAYEE_LOOKUP_RETRY_SECONDS", default=30)
PAYEE_CHECK_GIVE_UP_MINUTES = env.int("PAYEE_CHECK_GIVE_UP_MINUTES", default=60)

# --------------------------------------------------------------------------- webhooks (decisions §6)
# Loopback/private/reserved destinations are refused unless this is on
# (development and tests only; production forces it off).
WEBHOOKS_ALLOW_PRIVATE_NETWORKS = env.bool("WEBHOOKS_ALLOW_PRIVATE_NETWORKS", default=False)
# Delay before each attempt, in seconds, counted from the previous attempt:
# 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, 24 h, 24 h (each ±20 %).
WEBHOOK_RETRY_SCHEDULE = env.list(
    "WEBHOOK_RETRY_SCHEDULE", cast=int, default=[0, 5, 300, 1800, 7200, 18000, 36000, 36000, 86400, 86400]
)
WEBHOOK_JITTER = env.float("WEBHOOK_JITTER", default=0.2)
WEBHOOK_CONNECT_TIMEOUT = env.float("WEBHOOK_CONNECT_TIMEOUT", default=3.0)
WEBHOOK_TIMEOUT = env.float("WEBHOOK_TIMEOUT", default=15.0)
# Retries due within this many seconds ride a Celery countdown; later ones
# are stored as a due time and picked by the relay, so no ETA ever nears
# the broker's visibility timeout.
WEBHOOK_MAX_COUNTDOWN = env.int("WEBHOOK_MAX_COUNTDOWN", default=60)
WEBHOOK_RELAY_INTERVAL = env.float("WEBHOOK_RELAY_INTERVAL", default=10.0)
# A delivery the fast path has not taken this long after it was due is the relay's.
WEBHOOK_RELAY_GRACE = env.int("WEBHOOK_RELAY_GRACE", default=30)
WEBHOOK_DISABLE_AFTER_DAYS = env.int("WEBHOOK_DISABLE_AFTER_DAYS", default=5)
WEBHOOK_SECRET_ROTATION_HOURS = env.int("WEBHOOK_SECRET_ROTATION_HOURS", default=24)
# Bulkheads (docs/operations/queues-and-workers.md, "The webhook worker").
# Endpoints an account may have (not deleted; disabled ones count: staff may
# enable them again); Stripe allows 16.
WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = env.int("WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT", default=16)
# Deliveries in flight at once to one endpoint (or one account's postbacks),
# across every worker, and always one less than the account's share (below),
# so one hanging endpoint leaves its account's others a slot; past it a
# delivery waits WEBHOOK_DEFER_SECONDS, or half the time it has waited when
# longer (at most WEBHOOK_MAX_COUNTDOWN), ±50 %, without an attempt counted.
# 0 = no cap of its own (one less than the account's share still applies).
WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT = env.int("WEBHOOK_MAX_CONCURRENT_PER_ENDPOINT", default=4)
WEBHOOK_DEFER_SECONDS = env.float("WEBHOOK_DEFER_SECONDS", default=3.0)
# The share of the webhook worker's threads one account's deliveries (every
# endpoint and postback of it) may hold at once, across every worker, in
# (0, 1]: 0.5 of 8 threads is 4, so the other 4 always serve other accounts.
# Past it a delivery is deferred as above. The threads are the worker's own
# --concurrency; WEBHOOK_WORKER_CONCURRENCY (what Procfile and compose start it
# with) outside a worker.
WEBHOOK_ACCOUNT_SHARE = env.float("WEBHOOK_ACCOUNT_SHARE", default=0.5)
WEBHOOK_WORKER_CONCURRENCY = env.int("WEBHOOK_WORKER_CONCURRENCY", default=8)
