"""Celery reads its configuration from a copy of Django's settings
(config.celery.DjangoSettings) instead of Django's lazy settings object:
every setting Celery knows must read the same as through
``django.conf:settings``, Celery's documented source."""

from __future__ import annotations

from celery import Celery
from celery.app.utils import SETTING_KEYS  # type: ignore[attr-defined]  # not in celery-types' stub
from django.conf import settings

from config.celery import DjangoSettings, app


def configured(source: object, namespace: str | None = None) -> Celery:
    celery = Celery("pix-config-test", set_as_current=False)
    celery.config_from_object(source, namespace=namespace)
    return celery


def test_every_celery_setting_reads_as_through_django_settings() -> None:
    ours = configured(DjangoSettings()).conf
    reference = configured("django.conf:settings", namespace="CELERY").conf
    for key in sorted(SETTING_KEYS):
        assert ours.get(key) == reference.get(key), key
    # Not only defaults: what the project sets comes through.
    assert ours.task_routes == settings.CELERY_TASK_ROUTES
    assert ours.broker_url == settings.CELERY_BROKER_URL
    assert ours.beat_schedule == settings.CELERY_BEAT_SCHEDULE
    assert ours.task_acks_late is True


def test_no_setting_of_ours_reads_as_deprecated() -> None:
    """Celery warns, in every worker and beat, for each setting it takes for
    a 3.x name (issue 30: twelve warnings buried make run's banner)."""
    conf = configured(DjangoSettings()).conf
    conf.finalize()
    assert conf.deprecated_settings == set()


def test_the_app_reads_the_copy() -> None:
    # (The suite routes tasks to its own queues through app.conf.update.)
    assert app.conf.beat_schedule == settings.CELERY_BEAT_SCHEDULE
    assert isinstance(app._config_source, DjangoSettings)  # type: ignore[attr-defined]  # not in the stub
