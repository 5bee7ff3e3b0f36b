"""The service's routes plus ``bench/ceiling/<id>`` (see bench/ceiling.py)."""

from django.urls import URLPattern, URLResolver, include, path

from bench.ceiling import CeilingView
from config.urls import handler404, handler500

urlpatterns: list[URLPattern | URLResolver] = [
    path("bench/ceiling/<str:charge_id>", CeilingView.as_view(), name="bench-ceiling"),
    path("", include("config.urls")),
]

__all__ = ["handler404", "handler500", "urlpatterns"]
