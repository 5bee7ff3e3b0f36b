FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=config.settings.production \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
# collectstatic needs settings but no database: give the production checks
# throwaway values for this build step only.
RUN DATABASE_URL=postgres://build@localhost/build REDIS_URL=redis://localhost:6379/0 SECRET_KEY=build \
    ALLOWED_HOSTS=localhost PUBLIC_BASE_URL=https://build.invalid python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 pix && mkdir -p /app/var/metrics && chown -R pix /app/var

USER pix
EXPOSE 8000
# Workers, threads and timeouts: config/gunicorn.conf.py (WEB_WORKERS, WEB_THREADS, WEB_TIMEOUT).
CMD ["gunicorn", "config.wsgi:application", "--config", "config/gunicorn.conf.py", "--bind", "0.0.0.0:8000", "--access-logfile", "-"]
