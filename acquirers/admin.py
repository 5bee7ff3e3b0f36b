"""Back office for acquirers. Which acquirers an account may use (grants and
slots) is edited on the account's page: the inlines below, added to it
through ``accounts.admin.accounts.account_page_inline``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import formats, timezone

from accounts.admin.accounts import account_page_inline
from accounts.models import Account
from acquirers import adapters, breaker
from acquirers.adapters.base import InvalidOptions
from acquirers.models import Acquirer, AcquirerGrant, AcquirerSlot, InboundNotification
from core.admin.money import ReaisFieldsMixin, money
from core.admin.records import ReadOnlyAdminMixin
from core.plural import plural

#: Read-only fields of an existing acquirer's page (acquirers.breaker).
CIRCUIT_FIELDS = (
    "circuit_state",
    "circuit_failures",
    "circuit_opened_at",
    "circuit_retry_at",
    "recent_success_rate",
    "recent_latency",
)
_UNKNOWN = "indisponível (Redis fora do ar)"
_OFF = "desligado (ACQUIRER_BREAKER_ENABLED)"
RESET_TEMPLATE = "admin/acquirers/acquirer/confirm_reset_circuit.html"
#: Read-only fields of an existing acquirer's page, shown after the override.
CONVERSION_FIELDS = ("conversion_measured", "conversion_shown")
CONVERSION_SOURCES = {
    "override": "definida pela equipe",
    "measured": "medida",
    "default": "padrão: sem valor definido pela equipe nem medição",
}
#: The models' CheckConstraints, said on their field (the database still enforces them).
MAX_TICKET_NEGATIVE = "O ticket máximo não pode ser negativo."
PRIORITY_RANGE = "A prioridade vai de 1 (primária) a 3 (terciária)."


def _adapter_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in adapters.adapter_names()]


class AcquirerForm(forms.ModelForm[Acquirer]):
    """Options are checked by the acquirer's own adapter before they are saved."""

    adapter = forms.ChoiceField(label="Adaptador", choices=_adapter_choices)

    class Meta:
        model = Acquirer
        fields = "__all__"  # noqa: DJ007 - the admin decides what it shows
        # Staff type "92,5", as the page shows it.
        localized_fields = ("conversion_percent_override",)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "adapter" in data:
            try:
                data["options"] = adapters.validate_options(data["adapter"], data.get("options") or {})
            except InvalidOptions as exc:
                self.add_error("options", str(exc))
        # acquirer_max_ticket_non_negative (acquirer_key_pattern is the key field's own validator).
        if data.get("max_ticket") is not None and data["max_ticket"] < 0:
            self.add_error("max_ticket", MAX_TICKET_NEGATIVE)
        return data


class AcquirerSlotForm(forms.ModelForm[AcquirerSlot]):
    class Meta:
        model = AcquirerSlot
        fields = "__all__"  # noqa: DJ007 - the inline decides what it shows

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # slot_priority_1_to_3, on the field.
        if data.get("priority") is not None and not 1 <= data["priority"] <= 3:
            self.add_error("priority", PRIORITY_RANGE)
        return data


def _attach_health(acquirers: Iterable[Acquirer]) -> None:
    """Read the breakers of a page of acquirers in one Redis round trip and
    keep each on its row, for the columns and fields below."""
    rows = list(acquirers)
    found = breaker.snapshots(rows)
    for acquirer in rows:
        acquirer._health = None if found is None else found[acquirer.pk]  # type: ignore[attr-defined]


def _health_of(acquirer: Acquirer) -> breaker.Health | None:
    if not hasattr(acquirer, "_health"):
        _attach_health([acquirer])
    found: breaker.Health | None = acquirer._health  # type: ignore[attr-defined]
    return found


def _when(moment: Any) -> str:
    return formats.localize(timezone.localtime(moment)) if moment else "-"


def _percent(value: Decimal) -> str:
    return f"{value:.2f} %".replace(".", ",")  # pt-BR decimal comma


def _charges(count: int) -> str:
    return f"{count} cobrança" if count == 1 else f"{count} cobranças"


@account_page_inline
class AcquirerGrantInline(admin.TabularInline[AcquirerGrant, Account]):
    model = AcquirerGrant
    fields = ("acquirer", "created_at")
    readonly_fields = ("created_at",)
    autocomplete_fields = ("acquirer",)
    extra = 0


@account_page_inline
class AcquirerSlotInline(admin.TabularInline[AcquirerSlot, Account]):
    model = AcquirerSlot
    form = AcquirerSlotForm
    fields = ("purpose", "priority", "acquirer")
    autocomplete_fields = ("acquirer",)
    extra = 0


@admin.register(Acquirer)
class AcquirerAdmin(ReaisFieldsMixin, admin.ModelAdmin[Acquirer]):
    form = AcquirerForm
    reais_fields = ("max_ticket",)
    max_ticket_brl = money("max_ticket", "ticket máximo")
    list_display = (
        "key",
        "name",
        "adapter",
        "enabled",
        "max_ticket_brl",
        "default_priority",
        "conversion_shown",
        "conversion_percent_override",
        "conversion_measured",
        "circuit",
        "recent_health",
    )
    list_filter = ("enabled", "adapter")
    search_fields = ("key", "name")
    #: Apps above acquirers add theirs with :func:`acquirer_page_action`.
    actions: Any = ("reset_circuit_breaker", "use_measured_conversion")

    def get_readonly_fields(self, request: HttpRequest, obj: Acquirer | None = None) -> tuple[str, ...]:
        # A breaker and a measurement exist once the acquirer does.
        return ("created_at", "updated_at", *((*CONVERSION_FIELDS, *CIRCUIT_FIELDS) if obj is not None else ()))

    def get_fields(self, request: HttpRequest, obj: Acquirer | None = None) -> list[Any]:
        # The measured and shown conversions next to staff's value, not at the page's end.
        fields = [f for f in super().get_fields(request, obj) if f not in CONVERSION_FIELDS]
        if obj is None or "conversion_percent_override" not in fields:
            return fields
        after = fields.index("conversion_percent_override") + 1
        return [*fields[:after], *CONVERSION_FIELDS, *fields[after:]]

    # ----------------------------------------------------------------- conversion

    @admin.display(description="conversão na API")
    def conversion_shown(self, acquirer: Acquirer) -> str:
        """What the listing shows customers, and where it comes from."""
        source = CONVERSION_SOURCES[acquirer.conversion_source]
        return f"{_percent(acquirer.conversion_percent)} ({source})"

    @admin.display(description="conversão medida")
    def conversion_measured(self, acquirer: Acquirer) -> str:
        if acquirer.conversion_measured_at is None:
            return "ainda não medida"
        when = _when(acquirer.conversion_measured_at)
        counted = _charges(acquirer.conversion_sample)
        if acquirer.conversion_measured_percent is None:
            minimum = settings.PIX_CONVERSION_MIN_SAMPLE
            return f"amostra insuficiente: {counted}, mínimo {minimum} (medida em {when})"
        return f"{_percent(acquirer.conversion_measured_percent)} de {counted} (medida em {when})"

    @admin.action(
        description="Mostrar a conversão medida (apagar o valor definido pela equipe)", permissions=["change"]
    )
    def use_measured_conversion(self, request: HttpRequest, queryset: QuerySet[Acquirer]) -> None:
        chosen = list(queryset.filter(conversion_percent_override__isnull=False).order_by("pk"))
        Acquirer.objects.filter(pk__in=[a.pk for a in chosen]).update(conversion_percent_override=None)
        for acquirer in chosen:
            self.log_change(request, acquirer, "Conversão definida pela equipe apagada (a API mostra a medida)")
        if not chosen:
            self.message_user(request, "Nenhuma adquirente escolhida tinha valor definido pela equipe.", messages.INFO)
        elif len(chosen) == 1:
            self.message_user(request, "1 adquirente passa a mostrar a conversão medida.", messages.SUCCESS)
        else:
            done = f"{len(chosen)} adquirentes passam a mostrar a conversão medida."
            self.message_user(request, done, messages.SUCCESS)

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        changelist = super().get_changelist_instance(request)
        # The page's rows are evaluated here and reused by the template.
        _attach_health(changelist.result_list)
        return changelist

    # ----------------------------------------------------------------- circuit breaker

    @admin.display(description="circuito")
    def circuit(self, acquirer: Acquirer) -> str:
        if not settings.ACQUIRER_BREAKER_ENABLED:
            return _OFF
        found = _health_of(acquirer)
        if found is None:
            return _UNKNOWN
        label = breaker.STATE_LABELS[found.state]
        return (
            f"{label} ({plural(found.failures, '{n} falha seguida', '{n} falhas seguidas')})"
            if found.failures
            else label
        )

    @admin.display(description="saúde recente")
    def recent_health(self, acquirer: Acquirer) -> str:
        found = _health_of(acquirer)
        if found is None:
            return _UNKNOWN
        if not found.calls:
            return "sem chamadas recentes"
        return f"{self.recent_success_rate(acquirer)}; {self.recent_latency(acquirer)}"

    @admin.display(description="estado do circuito")
    def circuit_state(self, acquirer: Acquirer) -> str:
        if not settings.ACQUIRER_BREAKER_ENABLED:
            return _OFF
        found = _health_of(acquirer)
        return _UNKNOWN if found is None else breaker.STATE_LABELS[found.state]

    @admin.display(description="falhas seguidas")
    def circuit_failures(self, acquirer: Acquirer) -> str:
        found = _health_of(acquirer)
        return _UNKNOWN if found is None else str(found.failures)

    @admin.display(description="aberto desde")
    def circuit_opened_at(self, acquirer: Acquirer) -> str:
        found = _health_of(acquirer)
        return _UNKNOWN if found is None else _when(found.opened_at)

    @admin.display(description="nova tentativa a partir de")
    def circuit_retry_at(self, acquirer: Acquirer) -> str:
        found = _health_of(acquirer)
        return _UNKNOWN if found is None else _when(found.retry_at)

    @admin.display(description="taxa de sucesso recente")
    def recent_success_rate(self, acquirer: Acquirer) -> str:
        found = _health_of(acquirer)
        if found is None:
            return _UNKNOWN
        if found.success_rate is None:
            return "-"
        # Declines are answers: they count as successes here, as in the breaker.
        rate = f"{found.success_rate:.1%}".replace(".", ",")  # pt-BR decimal comma
        return f"{rate} de {plural(found.calls, '{n} chamada', '{n} chamadas')} desde {_when(found.since)}"

    @admin.display(description="latência recente (p50 / p95)")
    def recent_latency(self, acquirer: Acquirer) -> str:
        found = _health_of(acquirer)
        if found is None:
            return _UNKNOWN
        if found.p50_ms is None:
            return "-"
        return f"p50 {found.p50_ms} ms / p95 {found.p95_ms} ms"

    def has_reset_circuit_breaker_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("acquirers.reset_circuit_breaker")

    @admin.action(description="Resetar o circuit breaker (fechar o circuito)", permissions=["reset_circuit_breaker"])
    def reset_circuit_breaker(self, request: HttpRequest, queryset: QuerySet[Acquirer]) -> None:
        done = 0
        for acquirer in queryset.order_by("pk"):
            try:
                breaker.reset(acquirer)
            except breaker.HealthUnavailable:
                self.message_user(request, f"{acquirer.key}: Redis indisponível; nada mudou.", messages.ERROR)
                continue
            self.log_change(request, acquirer, "Circuit breaker resetado (circuito fechado)")
            done += 1
        if done:
            self.message_user(
                request, plural(done, "{n} circuito fechado.", "{n} circuitos fechados."), messages.SUCCESS
            )

    def get_urls(self) -> list[URLPattern]:
        reset = path(
            "<path:object_id>/reset-circuit/",
            self.admin_site.admin_view(self.reset_circuit_view),
            name="acquirers_acquirer_reset_circuit",
        )
        return [reset, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_reset_circuit": self.has_reset_circuit_breaker_permission(request)}
        return super().change_view(request, object_id, form_url, extra)

    def reset_circuit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The detail page's reset: a confirmation, then the list action."""
        if not self.has_reset_circuit_breaker_permission(request):
            raise PermissionDenied
        acquirer = get_object_or_404(Acquirer, pk=object_id)
        back = reverse("admin:acquirers_acquirer_change", args=[acquirer.pk])
        if request.method == "POST":
            self.reset_circuit_breaker(request, Acquirer.objects.filter(pk=acquirer.pk))
            return HttpResponseRedirect(back)
        context = {
            **self.admin_site.each_context(request),
            "title": "Resetar o circuit breaker?",
            "opts": self.opts,
            "original": acquirer,
            "state": self.circuit(acquirer),
            "back_url": back,
        }
        return TemplateResponse(request, RESET_TEMPLATE, context)

    def get_exclude(self, request: HttpRequest, obj: Acquirer | None = None) -> tuple[str, ...]:
        # Options hold the provider's credentials (e.g. notification_secret);
        # staff who may not change an acquirer have no use for them.
        if self.has_change_permission(request, obj):
            return ()
        return ("options",)


@admin.register(InboundNotification)
class InboundNotificationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin[InboundNotification]):
    """What acquirers sent us, exactly as received: read-only evidence."""

    list_display = ("received_at", "acquirer", "status", "remote_addr", "processed_at")
    list_filter = ("status", "acquirer")
    search_fields = ("body", "error")
    date_hierarchy = "received_at"
    readonly_fields = ("acquirer", "headers", "body", "remote_addr", "status", "error", "received_at", "processed_at")


def acquirer_page_action(
    action: Callable[..., Any], *, permission: str, allowed: Callable[[HttpRequest], bool]
) -> Callable[..., Any]:
    """Add ``action`` to the acquirers' list, after the ones already there,
    with its ``permission`` (the action's ``permissions=[permission]``)
    decided by ``allowed(request)``. For the apps above acquirers
    (reconciliation on demand, in reconciliation), which acquirers may not import;
    like :func:`accounts.admin.accounts.account_page_inline`."""
    AcquirerAdmin.actions = (*AcquirerAdmin.actions, action)
    setattr(AcquirerAdmin, f"has_{permission}_permission", lambda self, request: allowed(request))
    return action
