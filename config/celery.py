"""The Celery application (worker and beat): ``celery -A config worker``."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

import config.broker as broker

# Fail closed: production unless the process names its settings (manage.py).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
# Before any connection: a worker must survive the broker restarting (config/broker.py).
broker.register()


#: The prefix of Celery's settings among Django's.
NAMESPACE = "CELERY_"


class DjangoSettings(Mapping[str, Any]):
    """Django's settings as Celery's configuration source, read once.

    Given ``django.conf:settings``, Celery wraps the settings object in a
    ``DictAttribute``: every read of ``app.conf`` tries up to four names
    (``CELERY_TASK_ROUTES``, ``task_routes``, the old names), each a
    ``getattr`` on Django's lazy settings, most of them missing and raising
    ``AttributeError``. A task's publish reads the configuration six times:
    that was 40% of the publish's CPU (``process_withdrawal.apply_async``,
    about 750 µs, measured one at a time), a twentieth of a withdrawal's.

    Here Celery gets a plain mapping of the same values under Celery's own
    names: every ``CELERY_*`` setting as the name the ``CELERY`` namespace
    would have found (``CELERY_TASK_ROUTES`` → ``task_routes``), copied the
    first time Celery reads its configuration (after Django's settings are
    importable). Given the prefixed names, Celery took four of them
    (``CELERY_ACCEPT_CONTENT``, ``CELERY_TASK_SERIALIZER``,
    ``CELERY_RESULT_BACKEND``, ``CELERY_TIMEZONE``) for its 3.x names and
    printed a deprecation warning for each, in every worker and beat
    (issue 30: they buried ``make run``'s banner). Settings do not change while a process runs; the tests
    change Celery's configuration through ``app.conf.update``, which this
    does not affect (``override_settings`` of a ``CELERY_`` name would not
    be seen, and no test does it)."""

    @functools.cached_property
    def _settings(self) -> dict[str, Any]:
        from django.conf import settings

        return {
            name.removeprefix(NAMESPACE).lower(): getattr(settings, name)
            for name in dir(settings)
            if name.startswith(NAMESPACE) and name.isupper()
        }

    def __getitem__(self, key: str) -> Any:
        return self._settings[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings)

    def __len__(self) -> int:
        return len(self._settings)


app = Celery("pix_service")
app.config_from_object(DjangoSettings())
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
