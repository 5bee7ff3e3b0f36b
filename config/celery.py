"""The Celery application (worker and beat): ``celery -A config worker``."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from config import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
# Before any connection: a worker must survive the broker restarting (config/broker.py).
broker.register()

app = Celery("pix_service")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# Readiness and /metrics know a worker is up by its heartbeat in Redis.
_beater: Any = None


@worker_ready.connect
def _start_heartbeat(sender: Any, **kwargs: Any) -> None:
    global _beater
    from observability.heartbeat import Beater

    _beater = Beater(sender.hostname)
    _beater.start()


@worker_shutdown.connect
def _stop_heartbeat(**kwargs: Any) -> None:
    if _beater is not None:
        _beater.stop()
