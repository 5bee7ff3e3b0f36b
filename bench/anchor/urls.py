from django.urls import URLPattern, path

from bench.anchor.views import AnchorView

urlpatterns: list[URLPattern] = [path("anchor/<uuid:charge_id>", AnchorView.as_view())]
