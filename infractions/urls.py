from django.urls import URLPattern, URLResolver, path

from infractions.apis import InfractionDefenseApi, InfractionDetailApi, InfractionsApi

urlpatterns: list[URLPattern | URLResolver] = [
    path("infractions", InfractionsApi.as_view(), name="infractions"),
    path("infractions/<str:infraction_id>", InfractionDetailApi.as_view(), name="infraction-detail"),
    path("infractions/<str:infraction_id>/defense", InfractionDefenseApi.as_view(), name="infraction-defense"),
]
