"""Back office for accounts: the list, the account's page and its actions
(the form: ``account_form``; status changes with a reason:
``account_status``; API credentials: ``credentials``; account change
requests: ``changes``; the daily settlement: ``settlement``).

The admin collects input, checks the staff permission and reports; every
status change and every credential goes through ``accounts.services``.
"""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.db import transaction
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from accounts.account_changes import account_create_by_staff
from accounts.admin.account_form import (
    ACCOUNT_REAIS_FIELDS,
    ADD_IDENTITY,
    CONFIGURATION,
    IDENTITY,
    RELATED_LISTS,
    SUMMARY,
    AccountAdminForm,
)
from accounts.admin.account_status import TRANSITIONS, list_action, transition_view
from accounts.admin.changes import CHANGE_REASON_FIELDSET, pending_changes, report_requested, save_controlled_changes
from accounts.admin.credentials import CredentialInline, can_manage_credentials, issue_credential_view
from accounts.admin.decisions import staff_user
from accounts.admin.settlement import settlement_view
from accounts.models import Account, AccountBalance
from accounts.services import account_rotate_postback_secret
from core.admin.money import ReaisFieldsMixin
from core.admin.reveal import reveal_later, reveal_url
from core.daily_counts import PAYEE_LOOKUPS, daily_count
from core.documents import bare_document, format_document
from core.money import brl

if TYPE_CHECKING:
    from django.contrib.admin.options import InlineModelAdmin, _FieldsetSpec
    from django.utils.functional import _StrPromise

_ID_PREFIX = re.compile(r"^[0-9a-f-]{4,36}$")
#: Django's pt-BR admin messages say "O conta … foi alterado"; a conta is feminine.
_FEMININE = (
    ("O conta ", "A conta "),
    (" foi adicionado ", " foi adicionada "),
    (" foi alterado ", " foi alterada "),
    ("alterá-lo", "alterá-la"),
    ("adicionar outro ", "adicionar outra "),
)


POSTBACK_PAGE_TEMPLATE = "admin/accounts/postback_secret.html"


def show_postback_secret_once(request: HttpRequest, account: Account, secret: str, *, title: str) -> HttpResponse:
    return reveal_later(
        request,
        template=POSTBACK_PAGE_TEMPLATE,
        context={"title": title, "account": str(account), "secret": secret},
        url_name="admin:accounts_account_reveal",
        back_url=reverse("admin:accounts_account_change", args=[quote(account.pk)]),
    )


class BlockedFilter(admin.BooleanFieldListFilter):
    """Titled "Por bloqueio", not "Por bloqueada" (Django takes the field name)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.title = "bloqueio"


@admin.register(Account)
class AccountAdmin(ReaisFieldsMixin, admin.ModelAdmin[Account]):
    form = AccountAdminForm
    reais_fields = ACCOUNT_REAIS_FIELDS
    list_display = ("name", "document_display", "email", "status", "is_blocked", "balance_available", "created_at")
    list_filter = ("status", ("is_blocked", BlockedFilter))
    search_fields = ("name", "email", "document")
    search_help_text = "Nome, CPF/CNPJ (com ou sem pontuação), e-mail ou o começo do ID."
    list_select_related = ("balance",)
    actions = ("approve", "reject", "block", "unblock", "rotate_postback_secret")
    # Never rendered, whatever the fieldsets become.
    exclude = ("postback_secret", "previous_postback_secret", "previous_postback_secret_expires_at")
    #: Apps above accounts add theirs with :func:`account_page_inline`.
    inlines: ClassVar[tuple[type[InlineModelAdmin[Any, Any]], ...]] = (CredentialInline,)

    # ----------------------------------------------------------------- permissions

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("accounts.approve_account")

    def has_manage_credentials_permission(self, request: HttpRequest) -> bool:
        return can_manage_credentials(request)

    def has_delete_permission(self, request: HttpRequest, obj: Account | None = None) -> bool:
        # Accounts carry money history: they are rejected or blocked, never deleted.
        return False

    # ----------------------------------------------------------------- list

    @admin.display(description="CPF/CNPJ", ordering="document")
    def document_display(self, account: Account) -> str:
        if not account.document:
            return "—"
        return format_html('<span style="white-space: nowrap">{}</span>', format_document(account.document))

    @admin.display(description="saldo disponível", ordering="balance__available")
    def balance_available(self, account: Account) -> str:
        try:
            available = account.balance.available
        except AccountBalance.DoesNotExist:
            # Accounts made outside account_create get their row on first posting.
            available = 0
        return brl(available)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Account], search_term: str
    ) -> tuple[QuerySet[Account], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        document = bare_document(term)
        if len(document) >= 3 and document.isalnum() and document != term.upper():
            # A formatted CPF/CNPJ (11.222.333/0001-81) or a piece of one.
            results |= queryset.filter(document__icontains=document)
        if _ID_PREFIX.match(term.lower()):
            ids = Account.objects.annotate(id_text=Cast("id", TextField())).filter(id_text__startswith=term.lower())
            results |= queryset.filter(pk__in=ids.values("pk"))
        return results, may_have_duplicates

    # ----------------------------------------------------------------- the account's page

    @admin.display(description="saldo disponível")
    def balance_summary(self, account: Account) -> str:
        # Beside the balance, how it got there: the day-by-day settlement.
        settlement = reverse("admin:accounts_account_settlement", args=[quote(account.pk)])
        return format_html(
            '{} <a class="account-settlement" href="{}">Fechamento diário (créditos, débitos, tarifas e saldo '
            "por dia)</a>",
            self.balance_available(account),
            settlement,
        )

    @admin.display(description="registros da conta")
    def related_records(self, account: Account) -> str:
        items = []
        for url_name, label, related_name in RELATED_LISTS:
            try:
                url = reverse(url_name)
            except NoReverseMatch:
                continue
            related = getattr(account, related_name, None)
            count = f" ({related.count()})" if related is not None else ""
            items.append((f"{url}?account__id__exact={account.pk}", label, count))
        return format_html(
            '<ul class="account-records" style="margin: 0; padding: 0">{}</ul>',
            format_html_join("", '<li style="list-style: none"><a href="{}">{}</a>{}</li>', items),
        )

    pending_changes = pending_changes

    @admin.display(description="Consultas de titular (DICT) hoje")
    def payee_lookups_today(self, account: Account) -> int:
        """The payee check's lookups made at acquirers today (withdrawals.payees counts them in core.daily_counts)."""
        return daily_count(PAYEE_LOOKUPS, account.pk)

    def get_fieldsets(self, request: HttpRequest, obj: Account | None = None) -> _FieldsetSpec:
        # The postback secret is never on this page: it is shown once, when
        # the account is created or the secret rotated (support never sees it).
        if obj is None:
            return (ADD_IDENTITY, *CONFIGURATION)
        return (SUMMARY, IDENTITY, *CONFIGURATION, CHANGE_REASON_FIELDSET)

    def get_readonly_fields(self, request: HttpRequest, obj: Account | None = None) -> tuple[str, ...]:
        if obj is None:
            return () if self.has_approve_permission(request) else ("status",)
        # After creation the status moves only through the approve/reject actions.
        return ("balance_summary", "related_records", "pending_changes", "payee_lookups_today", "is_blocked", "status")

    def get_inlines(self, request: HttpRequest, obj: Account | None) -> tuple[type[InlineModelAdmin[Any, Any]], ...]:
        if obj is None:
            return tuple(inline for inline in self.inlines if inline is not CredentialInline)
        return tuple(self.inlines)

    def save_model(self, request: HttpRequest, obj: Account, form: AccountAdminForm, change: bool) -> None:
        if change:
            # The contact e-mail, manual approval and limits only change through
            # a request another staff member approves, unless they tighten.
            left = save_controlled_changes(self, request, obj, form)
            # Only the fields this form edits: a full save would write back the
            # status and block flag read when the page was opened, undoing an
            # approval or a block made meanwhile.
            model_fields = {field.name for field in Account._meta.concrete_fields}
            obj.save(update_fields=[*(f for f in form.fields if f in model_fields and f not in left), "updated_at"])
            return
        # The account gets its balance row, and its contact e-mail only by a
        # request another staff member approves (one person would otherwise
        # choose where its credentials' links go). The inlines, the admin log
        # and the redirect that follow hold the form's instance, so it becomes
        # the row just created.
        created, pending = account_create_by_staff(created_by=staff_user(request), **form.cleaned_data)
        obj.pk = created.pk
        obj.refresh_from_db()
        obj._state.adding = False
        if pending is not None:
            report_requested(self, request, obj, pending)

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        # What is only asked for did not change: the request's own entry says so.
        message = super().construct_change_message(request, form, formsets, add)
        if add:
            return message
        # Django lists the changed fields by their labels.
        asked = {form.fields[name].label or name for name in {*form.requested, "change_reason"}}
        for entry in message:
            if "changed" in entry:
                entry["changed"]["fields"] = [label for label in entry["changed"]["fields"] if label not in asked]
        return [entry for entry in message if "changed" not in entry or entry["changed"]["fields"]]

    def response_add(self, request: HttpRequest, obj: Account, post_url_continue: str | None = None) -> HttpResponse:
        # The postback secret was made with the row: shown now, once, to whoever
        # created the account, then never again.
        self.message_user(request, f"Conta {obj} cadastrada.", messages.SUCCESS)
        return show_postback_secret_once(request, obj, obj.postback_secret, title="Segredo de postback da nova conta")

    def message_user(
        self,
        request: HttpRequest,
        message: str | _StrPromise,
        level: int | str = messages.INFO,
        extra_tags: str = "",
        fail_silently: bool = False,
    ) -> None:
        # Django's pt-BR messages are masculine ("O conta … foi alterado"); a conta is feminine.
        text = str(message)
        if text.startswith("O conta "):
            for masculine, feminine in _FEMININE:
                text = text.replace(masculine, feminine)
            # Django's own message, escaped by format_html; the swaps add no markup.
            message = mark_safe(text) if isinstance(message, SafeString) else text  # noqa: S308
        super().message_user(request, message, level, extra_tags, fail_silently)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        account = self.get_object(request, unquote(object_id))
        offered = []
        if account is not None and self.has_approve_permission(request):
            offered = [
                (transition.verb, reverse(f"admin:accounts_account_{transition.name}", args=[quote(account.pk)]))
                for transition in TRANSITIONS.values()
                if transition.offered(account)
            ]
        extra_context = {
            **(extra_context or {}),
            "can_manage_credentials": can_manage_credentials(request),
            "account_transitions": offered,
        }
        return super().change_view(request, object_id, form_url, extra_context)

    # ----------------------------------------------------------------- approve, reject, block, unblock

    @admin.action(description="Aprovar contas selecionadas", permissions=["approve"])
    def approve(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return list_action(self, request, queryset, TRANSITIONS["approve"])

    @admin.action(description="Rejeitar contas selecionadas", permissions=["approve"])
    def reject(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return list_action(self, request, queryset, TRANSITIONS["reject"])

    @admin.action(description="Bloquear contas selecionadas", permissions=["approve"])
    def block(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return list_action(self, request, queryset, TRANSITIONS["block"])

    @admin.action(description="Desbloquear contas selecionadas", permissions=["approve"])
    def unblock(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        return list_action(self, request, queryset, TRANSITIONS["unblock"])

    def transition_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        return transition_view(self, request, object_id, name)

    @admin.action(description="Rotacionar segredo de postback (exibido uma vez)", permissions=["manage_credentials"])
    def rotate_postback_secret(self, request: HttpRequest, queryset: QuerySet[Account]) -> HttpResponse | None:
        accounts = list(queryset.order_by("pk")[:2])
        if len(accounts) != 1:
            self.message_user(request, "Selecione uma conta por vez para rotacionar o segredo.", messages.WARNING)
            return None
        [account] = accounts
        with transaction.atomic():
            secret = account_rotate_postback_secret(account=account)
            self.log_change(request, account, "Segredo de postback rotacionado")
        return show_postback_secret_once(request, account, secret, title="Novo segredo de postback")

    # ----------------------------------------------------------------- issuing credentials

    def get_urls(self) -> list[URLPattern]:
        custom = [
            *(
                path(
                    f"<path:object_id>/{name}/",
                    self.admin_site.admin_view(partial(self.transition_view, name=name)),
                    name=f"{self.opts.app_label}_{self.opts.model_name}_{name}",
                )
                for name in TRANSITIONS
            ),
            path(
                "<path:object_id>/issue-credential/",
                self.admin_site.admin_view(self.issue_credential_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_issue_credential",
            ),
            path(
                "<path:object_id>/settlement/",
                self.admin_site.admin_view(partial(settlement_view, self)),
                name=f"{self.opts.app_label}_{self.opts.model_name}_settlement",
            ),
            reveal_url(self),
        ]
        # Before the defaults: their "<path:object_id>/" catch-all would swallow it.
        return custom + super().get_urls()

    def issue_credential_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return issue_credential_view(self, request, object_id)


_Inline = TypeVar("_Inline", bound="type[InlineModelAdmin[Any, Any]]")


def account_page_inline(inline: _Inline) -> _Inline:
    """Class decorator: show ``inline`` on the account page, after the ones
    already there. For the apps above accounts (acquirer grants and slots,
    webhook endpoints), which accounts may not import. Admin autodiscovery
    imports their admin modules after this one (INSTALLED_APPS order), so
    every inline is in place before the system checks and the first request."""
    AccountAdmin.inlines = (*AccountAdmin.inlines, inline)
    return inline
