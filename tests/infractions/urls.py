"""The service's URLs with the sandbox's MED drivers, as config/urls.py
will list them (``infractions.sandbox_urls`` among the API's patterns)."""

from django.urls import include, path

from config.urls import api_patterns
from config.urls import urlpatterns as service_patterns
from infractions.sandbox_urls import urlpatterns as infraction_sandbox_patterns

urlpatterns = [path("api/", include([*infraction_sandbox_patterns, *api_patterns])), *service_patterns]
