from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path, re_path

from observability.metrics import metrics_view
from observability.views import DocsView, HealthView, ReadinessView, SchemaView, api_not_found

api_patterns: list[URLPattern | URLResolver] = [
    path("health", HealthView.as_view(), name="health"),
    path("health/ready", ReadinessView.as_view(), name="readiness"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(url_name="schema"), name="docs"),
    path("", include("payments.urls")),
    path("", include("acquirers.urls")),
    path("", include("withdrawals.urls")),
    path("", include("webhooks.urls")),
]

urlpatterns = [
    path(settings.ADMIN_URL, admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/", include(api_patterns)),
    # Anything else under /api answers in the error envelope, also with DEBUG on
    # (Django's handler404 is bypassed then).
    re_path(r"^api/", api_not_found),
]

handler404 = "observability.views.api_not_found"
handler500 = "observability.views.server_error"
