"""The one interface every acquirer adapter implements.

Adapters take and return the dataclasses below, never raw dicts or SDK
objects, and report failures with the exception classes below so the chain
can tell "try the next acquirer" (:class:`AcquirerUnavailable`) from "this
acquirer answered no" (:class:`AcquirerDeclined`).
"""

from __future__ import annotations

import abc
import datetime as dt
import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

# Due-date charges (cobv, lotecobv) and MED infractions' records.
from acquirers.adapters.due import DueBatchRequest as DueBatchRequest
from acquirers.adapters.due import DueBatchStatus as DueBatchStatus
from acquirers.adapters.due import DueCapability, DueChargeMethods
from acquirers.adapters.due import DueChargeRequest as DueChargeRequest
from acquirers.adapters.due import DueChargeResult as DueChargeResult
from acquirers.adapters.due import DueChargeStatus as DueChargeStatus
from acquirers.adapters.errors import AcquirerDeclined as AcquirerDeclined
from acquirers.adapters.errors import AcquirerTimeout as AcquirerTimeout
from acquirers.adapters.errors import AcquirerUnavailable as AcquirerUnavailable

# The failures every adapter reports (acquirers.adapters.errors).
from acquirers.adapters.errors import AdapterError as AdapterError
from acquirers.adapters.errors import CapabilityNotSupported as CapabilityNotSupported
from acquirers.adapters.errors import InvalidNotification as InvalidNotification
from acquirers.adapters.errors import InvalidOptions as InvalidOptions
from acquirers.adapters.errors import InvalidResponse as InvalidResponse
from acquirers.adapters.errors import PayeeRefused as PayeeRefused
from acquirers.adapters.errors import RecordNotFound as RecordNotFound
from acquirers.adapters.errors import UnknownAdapter as UnknownAdapter
from acquirers.adapters.errors import UnreadableNotification as UnreadableNotification
from acquirers.adapters.infractions import DefenseAttachment as DefenseAttachment
from acquirers.adapters.infractions import InfractionDefense as InfractionDefense
from acquirers.adapters.infractions import InfractionPage as InfractionPage
from acquirers.adapters.infractions import InfractionRecord as InfractionRecord
from acquirers.adapters.infractions import InfractionStatus as InfractionStatus

# The payee check (DICT lookup).
from acquirers.adapters.keys import KeyLookupCapability, KeyLookupMethods
from acquirers.adapters.keys import KeyOwner as KeyOwner

# The listings' records are part of this interface (list_received, list_sent).
from acquirers.adapters.records import ProviderListing as ProviderListing
from acquirers.adapters.records import ProviderPixRecord as ProviderPixRecord
from acquirers.adapters.records import ProviderRecordStatus as ProviderRecordStatus

# Pix Automático (rec, solicrec, locrec, cobr).
from acquirers.adapters.recurrence import CycleAttempt as CycleAttempt
from acquirers.adapters.recurrence import CycleChargeRequest as CycleChargeRequest
from acquirers.adapters.recurrence import CycleChargeState as CycleChargeState
from acquirers.adapters.recurrence import PushRequest as PushRequest
from acquirers.adapters.recurrence import PushSent as PushSent
from acquirers.adapters.recurrence import RecurrenceCapability, RecurrenceMethods
from acquirers.adapters.recurrence import RecurrenceCreated as RecurrenceCreated
from acquirers.adapters.recurrence import RecurrenceRequest as RecurrenceRequest
from acquirers.adapters.recurrence import RecurrenceState as RecurrenceState

# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class AcquirerConfig:
    """What an adapter needs from the acquirer row."""

    key: str
    options: Mapping[str, Any]
    connect_timeout: float  # seconds
    read_timeout: float  # seconds


@dataclass(frozen=True)
class ChargeRequest:
    charge_id: uuid.UUID
    txid: str  # 26-35 [a-zA-Z0-9], derived from the charge id: a retried create is idempotent
    amount: int  # centavos
    expires_in: int  # seconds
    payer_name: str
    payer_document: str
    merchant_name: str
    merchant_city: str
    description: str = ""


@dataclass(frozen=True)
class ChargeResult:
    provider_charge_id: str
    emv: str  # checked by the chain before anyone sees it


class PayoutStatus(enum.StrEnum):
    PROCESSING = "processing"
    PAID = "paid"
    FAILED = "failed"
    # The acquirer does not know it (yet): after an unclear send, not an answer.
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class PayoutRequest:
    withdrawal_id: uuid.UUID
    idempotency_id: str  # ^[a-zA-Z0-9]{1,35}$, derived from the withdrawal id
    amount: int  # centavos the recipient receives
    key_type: str
    key_value: str
    # The CPF/CNPJ the key must belong to (digits, "" when none): an adapter
    # whose PSP checks ownership on the send (Efí's ``favorecido.cpf``/``cnpj``)
    # passes it, and a refusal for it is a decline.
    payee_document: str = ""


@dataclass(frozen=True)
class PayoutResult:
    status: PayoutStatus
    provider_payout_id: str = ""
    e2e_id: str | None = None
    paid_at: dt.datetime | None = None
    reason: str = ""


class NotificationEvent(enum.StrEnum):
    CHARGE_PAID = "charge.paid"
    CHARGE_FAILED = "charge.failed"
    CHARGE_REFUNDED = "charge.refunded"
    CHARGE_CHARGEBACK = "charge.chargeback"
    CHARGE_CHARGEBACK_RESOLVED = "charge.chargeback_resolved"
    PAYOUT_PAID = "payout.paid"
    PAYOUT_FAILED = "payout.failed"
    PAYOUT_RETURNED = "payout.returned"
    #: A MED infraction changed (``reference``: its id there); a wake-up only: the listing is the evidence.
    INFRACTION_CHANGED = "infraction.changed"
    #: A Pix Automático recurrence changed (``reference``: its idRec); a wake-up only: ``GET /rec`` is the evidence.
    RECURRENCE_CHANGED = "recurrence.changed"
    #: A recurrence's cycle changed (``reference``: its cobr's txid); a wake-up only: ``GET /cobr`` is the evidence.
    CYCLE_CHANGED = "recurrence.cycle_changed"


@dataclass(frozen=True)
class Notification:
    """An acquirer's news about one of our charges or payouts.

    ``reference`` is our txid (charges) or idempotency id (payouts).
    """

    event: NotificationEvent
    reference: str
    e2e_id: str | None = None
    occurred_at: dt.datetime | None = None
    amount: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


class ProviderChargeState(enum.StrEnum):
    """Where a charge stands at the acquirer (status polling)."""

    ACTIVE = "active"  # can still be paid
    COMPLETED = "completed"  # paid; ``events`` says how
    REMOVED = "removed"  # withdrawn (by us or by the acquirer): can no longer be paid
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class ChargeStatusResult:
    """The acquirer's view of one charge, with the events it implies
    (paid, refunded), applied like an inbound notification's."""

    state: ProviderChargeState
    events: tuple[Notification, ...] = ()


class CancelResult(enum.StrEnum):
    """The acquirer's definitive answer to "withdraw this charge"."""

    REMOVED = "removed"  # it can no longer be paid (withdrawn now, or already)
    PAID = "paid"  # paid there before it could be withdrawn: the Pix is the payer's money, held there


@dataclass(frozen=True)
class RefundRequest:
    charge_id: uuid.UUID
    txid: str
    e2e_id: str  # the Pix being returned
    refund_id: str  # ^[a-zA-Z0-9]{1,35}$, derived from the charge id: a retried request is idempotent
    amount: int  # centavos
    reason: str = ""


class RefundStatus(enum.StrEnum):
    PROCESSING = "processing"
    DONE = "done"  # the money went back to the payer
    FAILED = "failed"
    #: The acquirer has no such devolução (only :meth:`AcquirerAdapter.refund_status` says so).
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class RefundResult:
    status: RefundStatus
    provider_refund_id: str = ""
    reason: str = ""


#: Header the notification view sets from the URL's secret segment (never
#: taken from the request itself) so adapters can verify it; never stored.
NOTIFICATION_TOKEN_HEADER = "X-Pix-Service-Notification-Token"  # noqa: S105 - a header's name


# --------------------------------------------------------------------------- adapter

#: An operation an adapter may or may not offer (``supports_<capability>``).
Capability = Literal[
    "charge",
    "payout",
    "refund",
    "cancel",
    "charge_status",
    "list_received",
    "list_sent",
    "infractions",
    DueCapability,
    RecurrenceCapability,
    KeyLookupCapability,
]
#: What an adapter that claims a capability must implement.
CAPABILITY_METHODS: dict[Capability, tuple[str, ...]] = {
    "charge": ("create_charge",),
    "payout": ("create_payout", "get_payout_status"),
    "refund": ("refund_charge", "refund_status"),
    "cancel": ("cancel_charge",),
    "charge_status": ("charge_status",),
    "list_received": ("list_received",),
    "list_sent": ("list_sent",),
    "infractions": ("list_infractions", "defend_infraction"),
    "due_charge": ("create_due_charge", "due_charge_status", "cancel_due_charge"),
    "due_charge_batch": ("create_due_charge_batch", "due_charge_batch_status"),
    "recurrence": (
        "create_recurrence",
        "find_recurrence",
        "recurrence_status",
        "request_authorisation",
        "cancel_recurrence",
        "create_cycle_charge",
        "cycle_charge_status",
        "cancel_cycle_charge",
        "retry_cycle_charge",
    ),
    "key_lookup": ("lookup_key",),
}


class AcquirerAdapter(DueChargeMethods, RecurrenceMethods, KeyLookupMethods, abc.ABC):
    """One provider's API. Instances are cheap; build one per use with
    :func:`acquirers.adapters.build`."""

    #: Registry name, stored in ``Acquirer.adapter``.
    name: ClassVar[str]
    #: What the adapter can do: selectors and callers check these flags. Charges and payouts are
    #: on unless turned off, the rest opt-in; a flag that is on needs its methods (checked by
    #: :func:`acquirers.adapters.register`); the defaults raise :class:`CapabilityNotSupported`.
    supports_charge: ClassVar[bool] = True
    supports_payout: ClassVar[bool] = True
    supports_refund: ClassVar[bool] = False
    #: A refund names the Pix returned by its e2e id (API Pix devolução): without one, no refund there.
    refund_needs_e2e_id: ClassVar[bool] = True
    #: Withdrawing a charge there; without it, the acquirer's own expiry of it stops a payer.
    supports_cancel: ClassVar[bool] = False
    supports_charge_status: ClassVar[bool] = False
    #: Listings for reconciliation (:mod:`reconciliation.run`), which skips an adapter without them.
    supports_list_received: ClassVar[bool] = False
    supports_list_sent: ClassVar[bool] = False
    #: MED infractions listed and defended; without it staff register them (maker-checker).
    supports_infractions: ClassVar[bool] = False
    unsupported_error = CapabilityNotSupported

    @classmethod
    def enabled(cls) -> bool:
        """False keeps the adapter out of the registry in this process (read
        at each lookup, so the settings of the moment decide)."""
        return True

    def __init__(self, config: AcquirerConfig) -> None:
        self.config = config
        self.options = self.validate_options(config.options)

    @classmethod
    def validate_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Return the normalised options or raise :class:`InvalidOptions`."""
        return dict(options)

    @classmethod
    def supports(cls, capability: Capability) -> bool:
        """Whether the adapter can do ``capability`` (its ``supports_*`` flag)."""
        return bool(getattr(cls, f"supports_{capability}"))

    @classmethod
    def missing_methods(cls) -> list[str]:
        """Methods of the capabilities the class claims that it does not implement."""
        return [
            method
            for capability, methods in CAPABILITY_METHODS.items()
            if cls.supports(capability)
            for method in methods
            if getattr(cls, method) is getattr(AcquirerAdapter, method)
        ]

    def create_charge(self, request: ChargeRequest) -> ChargeResult:
        """Create a dynamic PIX charge; raise an :class:`AdapterError` on failure."""
        raise CapabilityNotSupported(f"{self.name}: charges are not supported")

    def cancel_charge(self, txid: str) -> CancelResult:
        """Withdraw a charge so it can no longer be paid; idempotent (already
        withdrawn is :attr:`CancelResult.REMOVED`). Raise an :class:`AdapterError`
        when that is not known (not there yet, a timeout): the caller asks again."""
        raise CapabilityNotSupported(f"{self.name}: cancelling charges is not supported")

    def charge_status(self, txid: str) -> ChargeStatusResult:
        """Ask where a charge stands (reconciliation of charges left pending)."""
        raise CapabilityNotSupported(f"{self.name}: charge status polling is not supported")

    def list_received(self, start: dt.datetime, end: dt.datetime, page: str | None = None) -> ProviderListing:
        """One page of the Pix received (and charges) the acquirer records in
        ``[start, end]``; ``page`` is the previous page's ``next_page`` (None:
        the first). Raise an :class:`AdapterError` when a page cannot be read:
        the caller then gives up the whole listing (a partial one would read
        as "unknown there")."""
        raise CapabilityNotSupported(f"{self.name}: listing received Pix is not supported")

    def list_sent(self, start: dt.datetime, end: dt.datetime, page: str | None = None) -> ProviderListing:
        """One page of the Pix the acquirer sent for us in ``[start, end]`` (see :meth:`list_received`)."""
        raise CapabilityNotSupported(f"{self.name}: listing sent Pix is not supported")

    def list_infractions(self, since: dt.datetime, page: str | None = None) -> InfractionPage:
        """One page of the MED infractions on Pix we received, changed since
        ``since`` (``page``: the previous page's ``next_page``). Raise an
        :class:`AdapterError` when a page cannot be read."""
        raise CapabilityNotSupported(f"{self.name}: infractions are not supported")

    def defend_infraction(self, defense: InfractionDefense) -> None:
        """Submit the receiver's defence of an infraction. Raise
        :class:`AcquirerDeclined` for a definitive refusal (deadline past,
        closed); another :class:`AdapterError` when the answer is unknown (the
        caller asks again: a defence already there is success)."""
        raise CapabilityNotSupported(f"{self.name}: infractions are not supported")

    def refund_charge(self, request: RefundRequest) -> RefundResult:
        """Return a paid charge's money to the payer; idempotent on ``request.refund_id``."""
        raise CapabilityNotSupported(f"{self.name}: refunds are not supported")

    def refund_status(self, request: RefundRequest) -> RefundResult:
        """Where the refund ``request.refund_id`` stands, asking only: never
        makes one (a refund a chargeback released must not be made by asking).
        :attr:`RefundStatus.NOT_FOUND` when the acquirer has none."""
        raise CapabilityNotSupported(f"{self.name}: refunds are not supported")

    def create_payout(self, request: PayoutRequest) -> PayoutResult:
        """Send a PIX; must be idempotent on ``request.idempotency_id``."""
        raise CapabilityNotSupported(f"{self.name}: payouts are not supported")

    def get_payout_status(self, idempotency_id: str) -> PayoutResult:
        """Ask where a payout stands (no second send after a timeout). An
        adapter that sends no payouts holds none: never sent, the true answer."""
        return PayoutResult(status=PayoutStatus.NOT_FOUND)

    def authenticate_notification(self, headers: Mapping[str, str], body: bytes) -> None:
        """The cheap check that an inbound notification comes from the
        acquirer, run before the request is stored whole: raise
        :class:`InvalidNotification` if not. Never calls the acquirer.

        The default runs :meth:`parse_notification`, right for an adapter
        that verifies a signature and calls nobody; an adapter that confirms
        the news with the acquirer overrides this with the check that comes
        before its calls. ``parse_notification`` still verifies on its own."""
        try:
            self.parse_notification(headers, body)
        except UnreadableNotification:
            return  # authentic: the body is judged when the stored request is processed
        except AdapterError:
            return  # past its own checks, it needed the acquirer: processing decides

    @abc.abstractmethod
    def parse_notification(self, headers: Mapping[str, str], body: bytes) -> list[Notification]:
        """Authenticate and parse an inbound notification, or raise :class:`InvalidNotification`.

        An adapter that must confirm the news with the acquirer first may
        raise an :class:`AdapterError` when the acquirer cannot answer now:
        the notification stays stored and the acquirer is asked to retry.
        """
