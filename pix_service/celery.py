"""The Celery application (worker and beat): ``celery -A pix_service worker``."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pix_service.settings.local")

app = Celery("pix_service")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
