"""The pages an infraction's page opens: the defence staff send on the
account's behalf (``infractions.services.infraction_defend``, at once: the
merchant could have sent it itself), and the requests that change what the
infraction holds, which only ask (``infractions.approvals``): another staff
member approves them in *Pedidos sobre infrações MED*."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from accounts.admin.decisions import staff_user
from accounts.exceptions import ApprovalRefused
from core.admin.money import ReaisField
from core.exceptions import PixServiceError
from core.money import brl
from core.plural import plural
from infractions.approvals import REQUEST_PERMISSION, action_refusal, has_infractions_api, infraction_request_action
from infractions.defenses import Attachment, infraction_defend
from infractions.models import Infraction, InfractionRequest

DEFEND_PERMISSION = "infractions.defend_infraction"
DEFEND_LABEL = "Enviar defesa em nome da conta"
PAGE_TEMPLATE = "admin/infractions/infraction/action_form.html"
#: The defence's files together, at most (the API's cap when it declares one).
DEFENSE_MAX_BYTES: int = getattr(settings, "INFRACTION_DEFENSE_MAX_BYTES", 5 * 1024 * 1024)

Kind = InfractionRequest.Kind


class _MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class _MultipleFileField(forms.FileField):
    """Any number of files (Django's documented pattern for ``multiple``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", _MultipleFileInput())
        super().__init__(**kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        one = super().clean
        if isinstance(data, list | tuple):
            return [one(item, initial) for item in data]
        return [one(data, initial)] if data else []


class DefenseForm(forms.Form):
    text = forms.CharField(
        label="Defesa", max_length=5000, widget=forms.Textarea(attrs={"rows": 10, "cols": 90}), strip=True
    )
    attachments = _MultipleFileField(label="Anexos", required=False, help_text="Comprovantes de entrega, conversas…")

    def clean_attachments(self) -> list[Any]:
        files: list[Any] = self.cleaned_data.get("attachments") or []
        if sum(file.size for file in files) > DEFENSE_MAX_BYTES:
            raise forms.ValidationError(f"Os anexos somam mais de {DEFENSE_MAX_BYTES // (1024 * 1024)} MB.")
        return files


class RequestForm(forms.Form):
    reason = forms.CharField(
        label="Motivo", max_length=500, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), strip=True
    )

    def __init__(self, *args: Any, returned: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if returned:
            self.fields["returned_amount"] = ReaisField(
                label="Devolvido ao pagador",
                help_text="Quanto a adquirente informou que voltou ao pagador. Em reais, por exemplo 1.234,56.",
            )


def _infraction(modeladmin: Any, request: HttpRequest, object_id: str) -> Infraction:
    infraction: Infraction | None = modeladmin.get_object(request, unquote(object_id))
    if infraction is None:
        raise Http404
    return infraction


def _change_url(infraction: Infraction) -> str:
    return reverse("admin:infractions_infraction_change", args=[quote(infraction.pk)])


def _page(modeladmin: Any, request: HttpRequest, infraction: Infraction, **context: Any) -> TemplateResponse:
    response = TemplateResponse(
        request,
        PAGE_TEMPLATE,
        {
            **modeladmin.admin_site.each_context(request),
            "opts": modeladmin.model._meta,
            "original": infraction,
            "change_url": _change_url(infraction),
            "summary": summary(infraction),
            **context,
        },
    )
    add_never_cache_headers(response)
    return response


def summary(infraction: Infraction) -> list[tuple[str, str]]:
    """What the pages show of the infraction before staff act on it."""
    deadline = infraction.defense_deadline
    return [
        ("Conta", str(infraction.account or "— (nenhuma cobrança corresponde)")),
        ("Adquirente", str(infraction.acquirer)),
        ("Situação", str(infraction.get_status_display())),
        ("Valor contestado", brl(infraction.amount)),
        ("Bloqueado na adquirente", brl(infraction.blocked_amount)),
        ("Bloqueio no saldo", brl(infraction.hold)),
        ("Prazo de defesa", timezone.localtime(deadline).strftime("%d/%m/%Y %H:%M") if deadline else "—"),
        ("Motivo da infração", infraction.reason or "—"),
    ]


# --------------------------------------------------------------------------- the defence


def defend_view(modeladmin: Any, request: HttpRequest, object_id: str) -> HttpResponse:
    if not request.user.has_perm(DEFEND_PERMISSION):
        raise PermissionDenied
    infraction = _infraction(modeladmin, request, object_id)
    form = DefenseForm(request.POST, request.FILES) if request.method == "POST" else DefenseForm()
    if request.method == "POST" and form.is_valid():
        attachments = [
            Attachment(
                name=file.name, content_type=file.content_type or "application/octet-stream", content=file.read()
            )
            for file in form.cleaned_data["attachments"]
        ]
        try:
            with transaction.atomic():
                infraction_defend(
                    infraction_id=infraction.pk,
                    text=form.cleaned_data["text"],
                    attachments=attachments,
                    by=request.user.get_username(),
                    account=None,
                )
                modeladmin.log_change(
                    request,
                    infraction,
                    "Defesa enviada em nome da conta (" + plural(len(attachments), "{n} anexo", "{n} anexos") + ").",
                )
        except PixServiceError as exc:
            modeladmin.message_user(request, exc.message, messages.ERROR)
        else:
            modeladmin.message_user(request, _defended(infraction), messages.SUCCESS)
        return HttpResponseRedirect(_change_url(infraction))
    return _page(
        modeladmin,
        request,
        infraction,
        title=DEFEND_LABEL,
        effect="A defesa vai à adquirente em nome da conta e não pode ser trocada depois; a conta a vê pela API.",
        form=form,
        multipart=True,
    )


def _defended(infraction: Infraction) -> str:
    if has_infractions_api(infraction.acquirer):
        return "Defesa registrada em nome da conta: será entregue à adquirente agora."
    # The API Pix standard (bacen_pix) has no defence: the record is ours, the delivery staff's.
    return (
        f"Defesa registrada em nome da conta. A {infraction.acquirer} não recebe defesas pela API: "
        "entregue-a pelo canal dela (e-mail, portal) antes do prazo."
    )


@admin.action(description=DEFEND_LABEL, permissions=["defend"])
def defend(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Infraction]) -> HttpResponse | None:
    """The list's way to the defence page: one infraction at a time (each defence is its own text)."""
    selected = list(queryset.values_list("pk", flat=True)[:2])
    if len(selected) != 1:
        modeladmin.message_user(request, "Selecione uma infração por vez para enviar a defesa.", messages.WARNING)
        return None
    return HttpResponseRedirect(reverse("admin:infractions_infraction_defend", args=[quote(selected[0])]))


# --------------------------------------------------------------------------- requests


EFFECTS = {
    (Kind.ACCEPT_RETURN, True): "A conta não poderá mais enviar defesa; a adquirente encerra a infração e informa "
    "quanto voltou ao pagador, e só então a conta é debitada.",
    (Kind.ACCEPT_RETURN, False): "A infração é encerrada como aceita: o bloqueio é liberado e a parte da conta no "
    "valor devolvido (até o valor líquido da cobrança) é debitada do saldo.",
    (Kind.CLOSE_REJECTED, False): "A infração é encerrada como rejeitada: o bloqueio é liberado e a cobrança volta "
    "a paga.",
}


def request_view(modeladmin: Any, request: HttpRequest, object_id: str, kind: str) -> HttpResponse:
    if not request.user.has_perm(REQUEST_PERMISSION):
        raise PermissionDenied
    if kind not in (Kind.ACCEPT_RETURN, Kind.CLOSE_REJECTED):
        raise Http404
    infraction = _infraction(modeladmin, request, object_id)
    api = has_infractions_api(infraction.acquirer)
    returned = kind == Kind.ACCEPT_RETURN and not api
    refusal = action_refusal(infraction, kind, 0 if returned else None)
    if refusal is not None:
        modeladmin.message_user(request, refusal, messages.ERROR)
        return HttpResponseRedirect(_change_url(infraction))
    form = RequestForm(request.POST if request.method == "POST" else None, returned=returned)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                pending = infraction_request_action(
                    infraction=infraction,
                    kind=kind,
                    requested_by=staff_user(request),
                    reason=form.cleaned_data["reason"],
                    returned_amount=form.cleaned_data.get("returned_amount"),
                )
                asked = f"{pending.describe()}: pedido #{pending.pk} aguardando aprovação. Motivo: {pending.reason}"
                modeladmin.log_change(request, infraction, asked)
                modeladmin.log_addition(request, pending, f"Pedido: {pending.describe()}. Motivo: {pending.reason}")
        except ApprovalRefused as exc:
            modeladmin.message_user(request, exc.message, messages.ERROR)
        else:
            modeladmin.message_user(
                request,
                f"Pedido #{pending.pk} criado: nada mudou ainda. Outra pessoa da equipe precisa aprová-lo em "
                "Pedidos sobre infrações MED.",
                messages.SUCCESS,
            )
        return HttpResponseRedirect(_change_url(infraction))
    return _page(
        modeladmin,
        request,
        infraction,
        title=f"Pedir: {Kind(kind).label}",
        effect=f"Ao ser aprovado por outra pessoa da equipe: {EFFECTS[(Kind(kind), api)]}",
        form=form,
        multipart=False,
    )


def tools(modeladmin: Any, request: HttpRequest, infraction: Infraction | None) -> list[tuple[str, str]]:
    """``(url, label)`` of the pages this staff member may open for ``infraction`` now."""
    if infraction is None or infraction.is_closed:
        return []
    found = []
    deadline = infraction.defense_deadline
    if (
        request.user.has_perm(DEFEND_PERMISSION)
        and infraction.defense_submitted_at is None
        and infraction.defense_waived_at is None
        and (deadline is None or deadline > timezone.now())
    ):
        found.append((reverse("admin:infractions_infraction_defend", args=[quote(infraction.pk)]), DEFEND_LABEL))
    waiting = infraction.requests.filter(state=InfractionRequest.State.PENDING).first()
    if waiting is not None:
        # One open request per infraction: the next one waits for this decision.
        url = reverse("admin:infractions_infractionrequest_change", args=[waiting.pk])
        found.append((url, f"Pedido #{waiting.pk} aguardando aprovação"))
    elif request.user.has_perm(REQUEST_PERMISSION):
        api = has_infractions_api(infraction.acquirer)
        for kind in (Kind.ACCEPT_RETURN, Kind.CLOSE_REJECTED):
            returned = 0 if kind == Kind.ACCEPT_RETURN and not api else None
            if action_refusal(infraction, kind, returned) is None:
                url = reverse("admin:infractions_infraction_request", args=[quote(infraction.pk), kind])
                found.append((url, f"Pedir: {Kind(kind).label}"))
    return found
