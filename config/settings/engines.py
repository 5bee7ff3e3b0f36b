"""Local and test settings start from here: with no DATABASE_URL / REDIS_URL,
the embedded engines (same PostgreSQL and Redis, from wheels, under ./var)
are started on demand and used. Base and production never import them: the
production image does not carry them (requirements-local.txt)."""

from core.redis import celery_broker_url

from .base import *  # noqa: F403
from .base import DATABASES, REDIS_URL, caches, database, env

if not DATABASES:
    from dev import embedded

    DATABASES = database(embedded.postgres_settings(env.str("PIX_EMBEDDED_DB_NAME", default="pix_service")))
if not REDIS_URL:
    from dev import embedded

    REDIS_URL = embedded.redis_url()
    CACHES = caches(REDIS_URL)
    CELERY_BROKER_URL = celery_broker_url(REDIS_URL)
