"""Status-changing admin actions (charges, withdrawals): each selected
record moved through its model's transition service, logged, and counted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from core.admin.confirmation import Confirmation, confirm_first
from core.exceptions import PixServiceError
from core.plural import plural


@dataclass(frozen=True)
class TransitionActions:
    """The status-changing admin actions of one model (charges, withdrawals).

    ``move(pk, to_status, description, request)`` moves one record through
    the model's transition service and says whether it changed; ``refused``
    is the service's error for a status that no longer allows it (the record
    moved on since the list was loaded): that record is skipped and counted.
    ``done_message`` (singular, plural) gets ``{description}`` and ``{n}``,
    ``skipped_message`` (singular, plural) ``{n}``."""

    move: Callable[[Any, str, str, HttpRequest], bool]
    refused: type[Exception]
    done_message: tuple[str, str]
    skipped_message: tuple[str, str]
    #: Refusals staff must read (not a status that moved on): shown per record, nothing changed.
    reported: tuple[type[PixServiceError], ...] = ()

    def action(
        self,
        name: str,
        description: str,
        to_status: str,
        from_statuses: tuple[str, ...],
        *,
        permission: str = "change",
        confirmation: Confirmation | None = None,
    ) -> Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None]:
        """An admin action moving each selected record to ``to_status``,
        logging each change; records whose status does not allow it are
        skipped and counted. With a ``confirmation`` (money moves) it first
        shows the confirmation page and logs the reason given there."""

        def perform(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any], reason: str) -> None:
            done = skipped = 0
            for record in queryset.select_related(None).only("pk", "status"):
                changed = False
                if record.status in from_statuses:
                    try:
                        changed = self.move(record.pk, to_status, description, request)
                    except self.refused:  # moved on since the list was loaded
                        pass
                    except self.reported as exc:
                        modeladmin.message_user(request, f"{record.pk}: {exc.message}", messages.ERROR)
                        continue
                if changed:
                    done += 1
                    # The history is staff's: statuses by their pt-BR labels.
                    labels = dict(type(record)._meta.get_field("status").choices or ())
                    shown = f"{labels.get(record.status, record.status)} → {labels.get(to_status, to_status)}"
                    logged = f"{description} ({shown})"
                    modeladmin.log_change(request, record, f"{logged}. Motivo: {reason}" if reason else logged)
                else:
                    skipped += 1
            if done:
                modeladmin.message_user(
                    request, plural(done, *self.done_message).replace("{description}", description), messages.SUCCESS
                )
            if skipped:
                modeladmin.message_user(request, plural(skipped, *self.skipped_message), messages.WARNING)

        if confirmation is not None:
            return confirm_first(
                perform, name=name, description=description, permission=permission, confirmation=confirmation
            )

        def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
            perform(modeladmin, request, queryset, "")

        action.__name__ = name
        return admin.action(description=description, permissions=[permission])(action)
