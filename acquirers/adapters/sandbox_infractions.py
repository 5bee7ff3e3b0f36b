"""The sandbox acquirer's MED infractions: what it "reported" about the Pix
its charges received, kept in Redis like the rest of its state (a week), so
every process sees the same acquirer.

The sandbox drivers (``infractions.sandbox``) write here what a payer's PSP
and the MED would do at a real acquirer (open with a block, accept with a
return, reject, cancel); the service then learns it only the way it learns
a real acquirer's: :meth:`SandboxInfractions.list_infractions`, the
evidence, read by the poller's code. A defence the service delivers
(:meth:`SandboxInfractions.defend_infraction`) is recorded with the
infraction, as a real acquirer keeps it.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from acquirers.adapters.base import (
    AcquirerDeclined,
    InfractionDefense,
    InfractionPage,
    InfractionRecord,
    InfractionStatus,
)

_CLOSED = frozenset({InfractionStatus.ACCEPTED, InfractionStatus.REJECTED, InfractionStatus.CANCELED})
_MOMENTS = ("opened_at", "defense_deadline", "closed_at")


class SandboxInfractionRefused(Exception):
    """A driver's change the sandbox infraction's status does not allow (a
    rejected one accepted, say): nothing was recorded."""


def _moment(value: object) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _record(data: Mapping[str, Any]) -> InfractionRecord:
    return InfractionRecord(
        external_id=str(data["external_id"]),
        e2e_id=str(data["e2e_id"]),
        status=InfractionStatus(data["status"]),
        amount=int(data["amount"]),
        blocked_amount=int(data.get("blocked_amount", 0)),
        returned_amount=int(data.get("returned_amount", 0)),
        reason=str(data.get("reason", "")),
        opened_at=_moment(data.get("opened_at")),
        defense_deadline=_moment(data.get("defense_deadline")),
        closed_at=_moment(data.get("closed_at")),
        raw=dict(data),
    )


class SandboxInfractions:
    """The infractions half of :class:`~acquirers.adapters.sandbox.SandboxAdapter` (a mixin)."""

    if TYPE_CHECKING:  # provided by SandboxAdapter

        def _recorded(self, kind: str) -> list[tuple[str, dict[str, Any]]]: ...

        def _load(self, *parts: str) -> dict[str, Any] | None: ...

        def _store(self, value: Mapping[str, Any], *parts: str) -> None: ...

    # ------------------------------------------------------------------ the adapter interface

    def list_infractions(self, since: dt.datetime, page: str | None = None) -> InfractionPage:
        """Every infraction recorded here whose last change is at or after
        ``since``, oldest change first, in one page (they live a week)."""
        found = [
            data
            for _, data in self._recorded("infraction")
            if (changed := _moment(data.get("updated_at"))) is not None and changed >= since
        ]
        found.sort(key=lambda d: (d["updated_at"], d["external_id"]))
        return InfractionPage(records=tuple(_record(d) for d in found))

    def defend_infraction(self, defense: InfractionDefense) -> None:
        """Keep the defence with the infraction (open → in defence). Already
        defended is success (a delivery asked again after an unclear answer);
        a closed or unknown infraction, or one past its deadline, is refused."""
        data = self.infraction_get(defense.external_id)
        if data is None:
            raise AcquirerDeclined(f"sandbox: infraction {defense.external_id} unknown")
        if data.get("defense"):
            return
        if InfractionStatus(data["status"]) in _CLOSED:
            raise AcquirerDeclined(f"sandbox: infraction {defense.external_id} is closed ({data['status']})")
        deadline = _moment(data.get("defense_deadline"))
        now = timezone.now()
        if deadline is not None and now >= deadline:
            raise AcquirerDeclined(f"sandbox: the defence deadline of infraction {defense.external_id} has passed")
        data["defense"] = {
            "text": defense.text,
            "attachments": [
                {"name": a.name, "content_type": a.content_type, "size": len(a.content)} for a in defense.attachments
            ],
            "received_at": now.isoformat(),
        }
        data["status"] = InfractionStatus.IN_DEFENSE.value
        self._infraction_put(data, now)

    # ------------------------------------------------------------------ the drivers' side

    def infraction_get(self, external_id: str) -> dict[str, Any] | None:
        """The infraction as recorded here (for the drivers, tests and operators)."""
        return self._load("infraction", external_id)

    def infraction_open(
        self, *, e2e_id: str, amount: int, blocked_amount: int, reason: str, defense_hours: int
    ) -> dict[str, Any]:
        """A payer's PSP reports the Pix ``e2e_id``: a new infraction, its
        funds cautionarily blocked (``blocked_amount`` of them)."""
        now = timezone.now()
        data: dict[str, Any] = {
            "external_id": "sbxinf" + secrets.token_hex(12),
            "e2e_id": e2e_id,
            "status": InfractionStatus.OPEN.value,
            "amount": amount,
            "blocked_amount": blocked_amount,
            "returned_amount": 0,
            "reason": reason,
            "opened_at": now.isoformat(),
            "defense_deadline": (now + dt.timedelta(hours=defense_hours)).isoformat(),
            "closed_at": None,
        }
        return self._infraction_put(data, now)

    def infraction_close(
        self, external_id: str, status: InfractionStatus, *, returned_amount: int = 0
    ) -> dict[str, Any]:
        """The MED's decision on an open infraction (``accepted`` with what
        went back to the payer, ``rejected``, ``canceled``). The same decision
        again changes nothing; a later, larger return of an accepted one is
        recorded (MED 2.0 follows the money); anything else is refused."""
        data = self.infraction_get(external_id)
        if data is None:
            raise SandboxInfractionRefused(f"infraction {external_id} unknown at the sandbox")
        current = InfractionStatus(data["status"])
        if current in _CLOSED:
            if current is not status:
                raise SandboxInfractionRefused(f"infraction {external_id} is {current.value} already")
            if status is InfractionStatus.ACCEPTED and returned_amount > int(data["returned_amount"]):
                data["returned_amount"] = returned_amount
                return self._infraction_put(data, timezone.now())
            return data
        now = timezone.now()
        data["status"] = status.value
        data["returned_amount"] = returned_amount if status is InfractionStatus.ACCEPTED else 0
        data["closed_at"] = now.isoformat()
        return self._infraction_put(data, now)

    def _infraction_put(self, data: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
        data["updated_at"] = now.isoformat()
        self._store(data, "infraction", data["external_id"])
        return data


__all__ = ["SandboxInfractionRefused", "SandboxInfractions"]
