"""WSGI entry of the anchor (bench/anchor/server.py starts it under gunicorn)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.anchor.settings"
application = get_wsgi_application()
