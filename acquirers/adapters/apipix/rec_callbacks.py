"""Pix Automático's callbacks of the API Pix: ``{webhookUrl}/rec`` (body
``{"recs": [RecNotification]}``, after ``PUT /webhookrec``) and
``{webhookUrl}/cobr`` (``{"cobsr": [CobRNotification]}``, after ``PUT
/webhookcobr``).

Each entry is only a wake-up: it names a recurrence (its ``idRec``) or a
cycle (its cobr's ``txid``), and the app owning that record reads it from
the PSP (``GET /rec/{idRec}``, ``GET /cobr/{txid}``) and applies what the
PSP answers. Nothing else in the body is read: a status, an attempt or a
Pix in it is the sender's word, and whoever can reach the URL with its
token (a leak, a replay) must not be able to move a recurrence or money.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acquirers.adapters.apipix.callbacks import listed_entries
from acquirers.adapters.apipix.rec_records import _ID_REC, _TXID
from acquirers.adapters.base import Notification, NotificationEvent, UnreadableNotification


def rec_wakeups(data: Mapping[str, Any], *, most: int) -> list[Notification]:
    """A :data:`~NotificationEvent.RECURRENCE_CHANGED` per ``recs`` entry and
    a :data:`~NotificationEvent.CYCLE_CHANGED` per ``cobsr`` entry, each
    record once however often the body names it; none when the body has
    neither list. At most ``most`` entries in all (each costs a read at the
    PSP); UnreadableNotification when an identifier is malformed."""
    recs = listed_entries(data, "recs", most=most) or []
    cobsr = listed_entries(data, "cobsr", most=most) or []
    if len(recs) + len(cobsr) > most:
        raise UnreadableNotification(f"more than {most} recurrences and cycles in one callback")
    events: dict[tuple[NotificationEvent, str], Notification] = {}
    for entry in recs:
        id_rec = _identifier(entry, "idRec", _ID_REC.match)
        events.setdefault(
            (NotificationEvent.RECURRENCE_CHANGED, id_rec),
            Notification(event=NotificationEvent.RECURRENCE_CHANGED, reference=id_rec),
        )
    for entry in cobsr:
        txid = _identifier(entry, "txid", _TXID.match)
        # The idRec is kept for staff reading the event; the handler finds the cycle by txid alone.
        named = {"idRec": entry["idRec"]} if isinstance(entry.get("idRec"), str) else {}
        events.setdefault(
            (NotificationEvent.CYCLE_CHANGED, txid),
            Notification(event=NotificationEvent.CYCLE_CHANGED, reference=txid, raw=named),
        )
    return list(events.values())


def _identifier(entry: Mapping[str, Any], name: str, valid: Any) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not valid(value):
        raise UnreadableNotification(f"malformed {name} {str(value)[:40]!r}")
    return value
