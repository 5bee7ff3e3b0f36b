"""The top of the project: settings, URLs, the Celery app, WSGI and gunicorn.
Nothing imports it but entry points (manage.py, wsgi, celery -A config)."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
