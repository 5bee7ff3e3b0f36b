"""/api/due-charges (merchant) and the sandbox's due-date drivers."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

urlpatterns: list[URLPattern | URLResolver] = []
