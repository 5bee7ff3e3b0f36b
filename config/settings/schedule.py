"""Beat's periodic work, and the settings of the measured acquirer
conversion it keeps fresh. Part of ``base`` (which star-imports it), kept
apart so each file stays readable."""

from __future__ import annotations

import environ
from celery.schedules import crontab

env = environ.Env()  # base has read .env into the environment by now

CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "expire-charges": {"task": "payments.tasks.expire_charges", "schedule": 60.0},
    "poll-charge-statuses": {"task": "payments.tasks.poll_charge_statuses", "schedule": 60.0},
    "sweep-refunds": {"task": "payments.tasks.sweep_refunds", "schedule": 60.0},
    # Cancels at acquirers and returns of late payments whose task was lost (payments.cancellation, late_payments).
    "sweep-charge-cancels": {"task": "payments.tasks.sweep_charge_cancels", "schedule": 60.0},
    "sweep-late-payment-returns": {"task": "payments.tasks.sweep_late_payment_returns", "schedule": 60.0},
    # Pix Automático (recurrences.schedule): authorisations read back, cycles opened in their
    # window, sent, followed and retried. Every 5 minutes: the windows are days long.
    "recurrences-tick": {"task": "recurrences.tasks.tick", "schedule": 300.0},
    # Each acquirer's listings of yesterday (America/Sao_Paulo) against our records, daily at
    # 04:30 local (07:30 UTC): late enough for the acquirers to have closed the day.
    "reconcile-acquirers": {
        "task": "reconciliation.tasks.reconcile_acquirers_yesterday",
        "schedule": crontab(hour=env.int("RECONCILE_HOUR_UTC", default=7), minute=30),
    },
    "purge-idempotency-keys": {"task": "api.tasks.purge_idempotency_keys", "schedule": 3600.0},
    "poll-stuck-payouts": {"task": "withdrawals.tasks.poll_stuck_payouts", "schedule": 60.0},
    # Scheduled withdrawals of the day (America/Sao_Paulo) handed to the payout engine: the first
    # tick after local midnight sends them; later ticks find nothing new (withdrawals.schedule).
    "release-scheduled-withdrawals": {"task": "withdrawals.tasks.release_scheduled_withdrawals", "schedule": 600.0},
    # Payout batches whose staff decision was cut midway, or left unended (withdrawals.batches).
    "sweep-payout-batches": {"task": "withdrawals.tasks.sweep_payout_batches", "schedule": 120.0},
    "relay-webhooks": {
        "task": "webhooks.tasks.relay_webhooks",
        "schedule": env.float("WEBHOOK_RELAY_INTERVAL", default=10.0),
    },
    "purge-inbound-notifications": {"task": "acquirers.tasks.purge_inbound_notifications", "schedule": 86400.0},
    "purge-webhook-attempt-bodies": {"task": "webhooks.tasks.purge_webhook_attempt_bodies", "schedule": 86400.0},
    # MED infractions (infractions.tasks): each acquirer's listing (the evidence), the
    # deadline notices, and defences whose delivery was lost or is still unclear.
    "poll-infractions": {"task": "infractions.tasks.poll_infractions", "schedule": 300.0},
    "infraction-deadlines": {"task": "infractions.tasks.notify_deadlines", "schedule": 600.0},
    "sweep-defenses": {"task": "infractions.tasks.sweep_defenses", "schedule": 120.0},
    # The acquirer listing's measured conversion (payments/conversion.py).
    "measure-acquirer-conversion": {"task": "payments.tasks.measure_acquirer_conversion", "schedule": 600.0},
    # Batches of due-date charges whose tasks were lost (due_charges.tasks).
    "sweep-due-charge-batches": {"task": "due_charges.tasks.sweep_due_batches", "schedule": 60.0},
}

# The acquirer listing's conversion_percent, measured every 10 minutes (beat)
# as paid ÷ created charges of the last WINDOW_DAYS whose expiry has passed;
# below MIN_SAMPLE such charges there is no measurement (staff's value, else
# 0). Values below 1 count as 1.
PIX_CONVERSION_WINDOW_DAYS = env.int("PIX_CONVERSION_WINDOW_DAYS", default=7)
PIX_CONVERSION_MIN_SAMPLE = env.int("PIX_CONVERSION_MIN_SAMPLE", default=20)
