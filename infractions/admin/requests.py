"""*Pedidos sobre infrações MED*: registering an infraction an acquirer
without an infractions API reported by other means (this list's "add"
page, which only asks), and the queue where another staff member approves
or rejects what was asked (``infractions.approvals``), with the conventions
of the other maker-checker queues (``accounts.admin.decisions``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.html import format_html

from accounts.admin.decisions import (
    DECISION_COLUMNS,
    QUEUE_ORDERING,
    DecideButtonsMixin,
    RequestQueue,
    decide_each,
    log_on_record,
    staff_user,
)
from accounts.exceptions import ApprovalRefused
from acquirers import adapters
from acquirers.models import Acquirer
from core.admin.confirmation import confirm_or_perform
from core.admin.money import ReaisField
from core.admin.records import ReadOnlyAdminMixin
from core.money import brl
from infractions.approvals import (
    APPROVE_PERMISSION,
    REQUEST_PERMISSION,
    infraction_request_approve,
    infraction_request_register,
    infraction_request_reject,
    register_refusal,
)
from infractions.models import Infraction, InfractionRequest
from payments.models import Charge

State = InfractionRequest.State
DECIDE_TEMPLATE = "admin/infractions/infractionrequest/confirm_decision.html"
REGISTER_TEMPLATE = "admin/infractions/infraction/action_form.html"


# --------------------------------------------------------------------------- asking to register


class RegisterForm(forms.Form):
    """An infraction as the acquirer reported it by other means."""

    acquirer = forms.ModelChoiceField(
        label="Adquirente",
        queryset=Acquirer.objects.none(),
        help_text="Só adquirentes sem API de infrações: as outras informam as suas pela API.",
    )
    external_id = forms.CharField(label="Id da infração na adquirente", max_length=100)
    e2e_id = forms.CharField(label="E2E id do Pix contestado", max_length=64)
    amount = ReaisField(label="Valor contestado")
    blocked_amount = ReaisField(label="Valor bloqueado na adquirente", help_text="Em reais; 0 se nada foi bloqueado.")
    infraction_reason = forms.CharField(label="Motivo informado pela adquirente", max_length=500, required=False)
    defense_deadline = forms.DateTimeField(
        label="Prazo de defesa",
        required=False,
        help_text="Dia e hora de Brasília, por exemplo 30/11/2026 18:00.",
        widget=forms.DateTimeInput(attrs={"placeholder": "dd/mm/aaaa hh:mm"}),
    )
    reason = forms.CharField(
        label="Motivo do pedido",
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Como a adquirente informou (e-mail, portal, ofício…): quem aprova confere por esse canal.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with_api = adapters.adapter_names(supporting="infractions")
        field = self.fields["acquirer"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Acquirer.objects.exclude(adapter__in=with_api).order_by("name")

    def clean(self) -> dict[str, Any] | None:
        data = super().clean() or {}
        if all(
            data.get(name) is not None for name in ("acquirer", "external_id", "e2e_id", "amount", "blocked_amount")
        ):
            refusal = register_refusal(
                acquirer=data["acquirer"],
                external_id=data["external_id"],
                e2e_id=data["e2e_id"],
                amount=data["amount"],
                blocked_amount=data["blocked_amount"],
            )
            if refusal is not None:
                raise forms.ValidationError(refusal)
        return data


def register_view(modeladmin: Any, request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(REQUEST_PERMISSION):
        raise PermissionDenied
    form = RegisterForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                pending = infraction_request_register(
                    acquirer=data["acquirer"],
                    external_id=data["external_id"],
                    e2e_id=data["e2e_id"],
                    amount=data["amount"],
                    blocked_amount=data["blocked_amount"],
                    infraction_reason=data["infraction_reason"],
                    defense_deadline=data["defense_deadline"],
                    requested_by=staff_user(request),
                    reason=data["reason"],
                )
                modeladmin.log_addition(request, pending, f"Pedido: {pending.describe()}. Motivo: {pending.reason}")
        except ApprovalRefused as exc:
            form.add_error(None, exc.message)
        else:
            modeladmin.message_user(
                request,
                f"Pedido #{pending.pk} criado: nada foi bloqueado. Outra pessoa da equipe precisa aprová-lo.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(reverse("admin:infractions_infractionrequest_change", args=[pending.pk]))
    response = TemplateResponse(
        request,
        REGISTER_TEMPLATE,
        {
            **modeladmin.admin_site.each_context(request),
            "opts": modeladmin.model._meta,
            "title": "Registrar infração informada pela adquirente",
            "effect": "Ao ser aprovado por outra pessoa da equipe, a infração é aplicada como se a adquirente a "
            "tivesse listado: o valor bloqueado é retido no saldo da conta da cobrança com esse e2e id. "
            "Antes disso nada muda.",
            "change_url": reverse("admin:infractions_infractionrequest_changelist"),
            "form": form,
            "multipart": False,
        },
    )
    add_never_cache_headers(response)
    return response


# --------------------------------------------------------------------------- the queue


def _log_on_infraction(request: HttpRequest, pending: InfractionRequest, message: str) -> None:
    """The decision also goes to the infraction's own history (a registration: once it exists)."""
    if pending.infraction_id is None:
        return
    content_type = ContentType.objects.get_for_model(Infraction)
    log_on_record(request, content_type, str(pending.infraction_id), str(pending.infraction), message)


QUEUE = RequestQueue(
    label="Pedido",
    not_done="não aplicado",
    approved=("{n} pedido aprovado e aplicado.", "{n} pedidos aprovados e aplicados."),
    describe=lambda decided: f"({decided.describe()})",
    log_on_target=_log_on_infraction,
)


def _matching_charge(pending: InfractionRequest) -> Charge | None:
    if pending.infraction_id is not None:
        return pending.infraction.charge if pending.infraction else None
    # As infraction_apply matches it: the e2e id names one Pix, whichever acquirer took the charge.
    return Charge.objects.filter(e2e_id=pending.e2e_id).select_related("account").first()


def _decision_action(
    name: str, description: str, effect: str, decide: Callable[[Any, User, str], InfractionRequest], verb: str
) -> Callable[[Any, HttpRequest, QuerySet[InfractionRequest]], HttpResponse | None]:
    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[InfractionRequest]) -> HttpResponse | None:
        waiting = list(
            queryset.filter(state=State.PENDING)
            .select_related("acquirer", "infraction__account", "requested_by")
            .order_by("pk")
        )
        if not waiting:
            modeladmin.message_user(
                request, f"{description}: nenhum pedido selecionado aguarda decisão.", messages.WARNING
            )
            return None
        return confirm_or_perform(
            modeladmin,
            request,
            queryset,
            name=name,
            description=description,
            template=DECIDE_TEMPLATE,
            perform=lambda note: decide_each(
                modeladmin, request, queryset, note, decide=decide, verb=verb, queue=QUEUE
            ),
            page=lambda: {"effect": effect, "rows": [(pending, _matching_charge(pending)) for pending in waiting]},
        )

    action.__name__ = name
    return admin.action(description=description, permissions=["decide"])(action)


@admin.register(InfractionRequest)
class InfractionRequestAdmin(DecideButtonsMixin, ReadOnlyAdminMixin, admin.ModelAdmin[InfractionRequest]):
    """What staff asked about infractions, waiting for a second staff member."""

    change_list_template = "admin/infractions/infractionrequest/change_list.html"
    decide_buttons: ClassVar[list[tuple[str, str]]] = [
        ("approve_requests", "Aprovar e aplicar"),
        ("reject_requests", "Rejeitar"),
    ]

    list_display = ("id", "kind", "acquirer", "infraction_link", "what", *DECISION_COLUMNS)
    list_filter = ("state", "kind", "acquirer")
    ordering = QUEUE_ORDERING
    list_select_related = ("acquirer", "infraction", "requested_by", "decided_by")
    search_fields = ("=external_id", "=e2e_id", "=infraction__id")
    fields = (
        "kind",
        "acquirer",
        "infraction_link",
        "what",
        "external_id",
        "e2e_id",
        "amount_brl",
        "blocked_brl",
        "infraction_reason",
        "defense_deadline",
        "returned_brl",
        "charge_display",
        *DECISION_COLUMNS,
        "decision_note",
        "outcome",
    )
    readonly_fields = fields
    actions = (
        _decision_action(
            "approve_requests",
            "Aprovar e aplicar os pedidos selecionados",
            "Ao aprovar, o pedido é aplicado agora: uma infração registrada bloqueia o valor no saldo da conta, "
            "um encerramento libera o bloqueio (e, se aceita, debita a parte da conta no valor devolvido). Só "
            "outra pessoa, que não fez o pedido, pode aprová-lo. Confira com a adquirente, pelo canal informado "
            "no motivo, antes",
            lambda pk, staff, note: infraction_request_approve(request_id=pk, approver=staff, note=note),
            "Aprovado",
        ),
        _decision_action(
            "reject_requests",
            "Rejeitar os pedidos selecionados",
            "Ao rejeitar, nada é bloqueado, liberado nem debitado",
            lambda pk, staff, note: infraction_request_reject(request_id=pk, staff=staff, note=note),
            "Rejeitado",
        ),
    )

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return request.user.has_perm(REQUEST_PERMISSION)

    def has_decide_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(APPROVE_PERMISSION)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return register_view(self, request)

    @admin.display(description="o que foi pedido")
    def what(self, pending: InfractionRequest) -> str:
        return pending.describe()

    @admin.display(description="infração")
    def infraction_link(self, pending: InfractionRequest) -> str:
        if pending.infraction_id is None:
            return "— (registrada ao aprovar)" if pending.kind == InfractionRequest.Kind.REGISTER else "—"
        url = reverse("admin:infractions_infraction_change", args=[quote(pending.infraction_id)])
        return format_html('<a href="{}">{}</a>', url, pending.infraction)

    @admin.display(description="cobrança correspondente")
    def charge_display(self, pending: InfractionRequest) -> str:
        charge = _matching_charge(pending)
        if charge is None:
            return "Nenhuma cobrança com este e2e id: nada seria bloqueado."
        url = reverse("admin:payments_charge_change", args=[quote(charge.pk)])
        return format_html(
            '<a href="{}">{}</a> ({}, {}, líquido {})',
            url,
            charge.pk,
            charge.account,
            charge.get_status_display(),
            brl(charge.liquid_amount),
        )

    @admin.display(description="valor contestado")
    def amount_brl(self, pending: InfractionRequest) -> str:
        return "—" if pending.amount is None else brl(pending.amount)

    @admin.display(description="valor bloqueado na adquirente")
    def blocked_brl(self, pending: InfractionRequest) -> str:
        return "—" if pending.blocked_amount is None else brl(pending.blocked_amount)

    @admin.display(description="devolvido ao pagador")
    def returned_brl(self, pending: InfractionRequest) -> str:
        return "—" if pending.returned_amount is None else brl(pending.returned_amount)
