"""The exceptions adapters report failures with (re-exported by
:mod:`acquirers.adapters.base`): the chain tells "try the next acquirer"
(:class:`AcquirerUnavailable`) from "this acquirer answered no"
(:class:`AcquirerDeclined`)."""

from __future__ import annotations

from typing import ClassVar


class AdapterError(Exception):
    """Base of adapter failures; ``error_class`` is what attempts record."""

    error_class: ClassVar[str] = "error"


class AcquirerUnavailable(AdapterError):
    """Connection error, 5xx, refusal to create: the chain moves on."""

    error_class = "unavailable"


class AcquirerTimeout(AcquirerUnavailable):
    """No answer in time: the acquirer may have acted; the caller asks (decisions §4)."""

    error_class = "timeout"


class AcquirerDeclined(AdapterError):
    """A definitive answer: the acquirer will not do this (e.g. payout refused)."""

    error_class = "declined"


class RecordNotFound(AcquirerDeclined):
    """The acquirer answered that it holds no such record (a definitive 404),
    as opposed to not answering: what lets a caller conclude that a create
    whose answer was lost never happened."""

    error_class = "declined"


class PayeeRefused(AcquirerDeclined):
    """A payout send refused because the key's owner does not have the payee
    document it carried (``PayoutRequest.payee_document``): nothing sent."""

    error_class = "declined"


class InvalidResponse(AcquirerUnavailable):
    """The acquirer answered something we cannot use (garbage, invalid BR Code)."""

    error_class = "invalid_response"


class CapabilityNotSupported(AcquirerDeclined):
    """The adapter cannot do this operation: its ``supports_*`` flag is off.

    The selectors never put such an acquirer in a chain for the operation and
    callers check the flags first, so this is only the guard behind them.
    Should a call get through anyway, it is a definitive no (the chain moves
    on, the breaker sees a working acquirer), never an outage that would keep
    a payout waiting on an acquirer that cannot pay."""

    error_class = "declined"


class InvalidNotification(Exception):
    """An inbound notification failed authentication."""


class UnreadableNotification(InvalidNotification):
    """An authentic notification whose body the adapter cannot read."""


class InvalidOptions(ValueError):
    """An acquirer's stored options do not fit its adapter."""


class UnknownAdapter(InvalidOptions, AcquirerUnavailable):
    """No adapter of that name in this process (never written, or the sandbox
    with ``PIX_SANDBOX`` off): the acquirer cannot be called. Invalid options
    when saved; when called, an unavailable acquirer."""

    error_class = "unavailable"
