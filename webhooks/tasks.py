"""Webhook delivery tasks: one attempt per run, and the relay run by beat."""

from __future__ import annotations

from celery import shared_task

from webhooks.delivery import deliveries_relay, delivery_attempt
from webhooks.retention import webhook_attempt_bodies_purge


@shared_task(acks_late=True, ignore_result=True)
def deliver_webhook(delivery_id: str) -> str:
    """One attempt of one delivery. Idempotent: a delivery that is not due,
    is held by another worker, or already ended is left alone."""
    return str(delivery_attempt(delivery_id=delivery_id))


@shared_task(acks_late=True, ignore_result=True)
def relay_webhooks() -> int:
    """Hand due deliveries nobody took to workers (the outbox relay)."""
    return deliveries_relay()


@shared_task(ignore_result=True)
def purge_webhook_attempt_bodies() -> int:
    """Beat, daily: attempt bodies past their retention (LGPD)."""
    return webhook_attempt_bodies_purge()
