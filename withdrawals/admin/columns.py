"""The columns that show a withdrawal in reais and pt-BR, on its list and
page, and the amounts its confirmation pages show."""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.http import HttpRequest

from core.admin.lists import labelled, short_id
from core.admin.money import money
from core.documents import format_document, normalize_document
from withdrawals import payee_rules
from withdrawals.models import PayeeCheck, PixKeyType, Withdrawal


@admin.display(description="Chave de destino")
def destination(modeladmin: Any, withdrawal: Withdrawal) -> str:
    return f"{withdrawal.get_pix_key_type_display()}: {withdrawal.pix_key}"


def payee_found(withdrawal: Withdrawal) -> str:
    """What the payee check found in the DICT (withdrawals.payees): the
    owner's name, masked document and bank, and whether it matched; "" when
    the key was never looked up."""
    if not withdrawal.payee_check:
        return ""
    if withdrawal.payee_check == PayeeCheck.NOT_FOUND:
        return "Chave não encontrada no DICT"
    bank = withdrawal.payee_bank or withdrawal.payee_ispb
    found = f"{withdrawal.payee_name} ({withdrawal.payee_document_masked}), {bank}"
    verdict = "confere" if withdrawal.payee_check == PayeeCheck.MATCHED else "NÃO CONFERE"
    expected = _expected(withdrawal)
    return f"{found}: {verdict} com {format_document(expected)}" if expected else found


def _expected(withdrawal: Withdrawal) -> str:
    # The document the check compares with (the account's own under same ownership only).
    return payee_rules.expected_document(account=withdrawal.account, payee_document=withdrawal.payee_document)


@admin.display(description="Titular no DICT")
def payee_column(modeladmin: Any, withdrawal: Withdrawal) -> str:
    """The approval queue's indicator: the check's result at a glance."""
    if not withdrawal.payee_check:
        return "A consultar" if _expected(withdrawal) else "—"
    return f"{PayeeCheck(withdrawal.payee_check).label}: {withdrawal.payee_name or '-'}"


@admin.display(description="Consulta do titular (DICT)")
def payee_lookup(modeladmin: Any, withdrawal: Withdrawal) -> str:
    found = payee_found(withdrawal)
    if not found:
        wanted = _expected(withdrawal)
        return f"Ainda não consultada; esperado {format_document(wanted)}" if wanted else "Sem verificação pedida"
    when = withdrawal.payee_checked_at
    return f"{found} (consultado em {when:%d/%m/%Y %H:%M})" if when else found


def key_holder(withdrawal: Withdrawal) -> str:
    """Who receives the Pix, as far as the withdrawal says: the owner the
    payee check found in the DICT, else, as the key is all it keeps, a CPF
    or CNPJ key names the holder's document (flagged when it is not the
    account's own) and any other key says nobody is known."""
    if withdrawal.payee_check:
        return payee_found(withdrawal)
    if withdrawal.pix_key_type in (PixKeyType.CPF, PixKeyType.CNPJ):
        kind = PixKeyType(withdrawal.pix_key_type).label
        holder = f"{kind} {format_document(withdrawal.pix_key)} (a própria chave); nome não informado"
        own = withdrawal.account.document
        if not own:
            return f"{holder}. ATENÇÃO: a conta não tem CPF/CNPJ cadastrado para comparar"
        if (normalize_document(withdrawal.pix_key) or withdrawal.pix_key.upper()) != own:
            return f"{holder}. ATENÇÃO: não é o documento da conta ({format_document(own)})"
        return f"{holder}: o documento da própria conta"
    return "Desconhecido: o saque informa só a chave, sem o nome nem o documento do titular"


def account_document(withdrawal: Withdrawal) -> str:
    """The account's own CPF/CNPJ, beside the key's holder on the approval screens."""
    own = withdrawal.account.document
    return format_document(own) if own else "Não cadastrado"


@admin.display(description="Titular da chave")
def destination_holder(modeladmin: Any, withdrawal: Withdrawal) -> str:
    return key_holder(withdrawal)


@admin.display(description="CPF/CNPJ da conta")
def account_document_display(modeladmin: Any, withdrawal: Withdrawal) -> str:
    return account_document(withdrawal)


def liquid_amount(withdrawal: Withdrawal) -> int:
    return withdrawal.liquid_amount


def total_debit(withdrawal: Withdrawal) -> int:
    return withdrawal.total_debit


class WithdrawalColumns:
    """Columns of fields the API serializes: labelled here, not on the model
    (their verbose names would become OpenAPI titles)."""

    id_label = labelled("id", "ID")
    amount_brl = money("amount", "Valor")
    fee_brl = money("fee", "Taxa")
    total_debit_brl = money("total_debit", "Débito total")
    liquid_amount_brl = money("liquid_amount", "Valor enviado")
    status_label = labelled("status", "Status")
    pix_key_type_label = labelled("pix_key_type", "Tipo de chave")
    pix_key_label = labelled("pix_key", "Chave Pix")
    e2e_id_label = labelled("e2e_id", "ID end-to-end (E2E)")
    created_at_label = labelled("created_at", "Pedido em")
    paid_at_label = labelled("paid_at", "Pago em")
    destination = destination
    destination_holder = destination_holder
    payee_column = payee_column
    payee_lookup = payee_lookup
    account_document_display = account_document_display
    short_id = short_id

    fieldsets: ClassVar[Any] = (
        (
            None,
            {
                "fields": (
                    "id_label",
                    "account",
                    "status_label",
                    "amount_brl",
                    "fee_brl",
                    "discount_fee",
                    "total_debit_brl",
                    "liquid_amount_brl",
                    "version",
                )
            },
        ),
        (
            "Destino",
            {
                "fields": (
                    "pix_key_type_label",
                    "pix_key_label",
                    "destination_holder",
                    "payee_lookup",
                    "account_document_display",
                    "e2e_id_label",
                )
            },
        ),
        (
            "Pagamento",
            {
                "fields": (
                    "created_at_label",
                    "scheduled_for",
                    "approved_at",
                    "paid_at_label",
                    "acquirer",
                    "provider_payout_id",
                    "idempotency_id",
                    "failure_reason",
                    "hold_reason",
                    "held_since",
                    "payout_owner",
                    "payout_owner_since",
                    "payout_unclear_since",
                    "payout_leased_until",
                    "payout_lease_token",
                    "updated_at",
                )
            },
        ),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        computed = [
            f
            for f in flatten_fieldsets(self.fieldsets or ())
            if f.endswith(("_brl", "_label")) or f in ("destination_holder", "payee_lookup", "account_document_display")
        ]
        return [*super().get_readonly_fields(request, obj), *computed]  # type: ignore[misc]
