"""PIX Service: settings, URLs, the Celery app and the API error handler."""

from pix_service.celery import app as celery_app

__all__ = ["celery_app"]
