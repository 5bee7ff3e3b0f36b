"""Admin building blocks shared by the apps."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest


class ReadOnlyAdminMixin:
    """Evidence and money records: the back office looks, services write."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class UUIDSearchMixin:
    """Search also matches the primary key when the term is a UUID, and never
    lets a non-UUID term reach the UUID column (that would be a 500)."""

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> Any:
        results, may_have_duplicates = super().get_search_results(  # type: ignore[misc]
            request, queryset, search_term
        )
        with contextlib.suppress(ValueError):
            results |= queryset.filter(pk=uuid.UUID(search_term.strip()))
        return results, may_have_duplicates


class ReadOnlyInlineMixin:
    """An inline that only shows history (attempts, transitions, deliveries)."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def transition_action(
    *,
    name: str,
    description: str,
    to_status: str,
    from_statuses: tuple[str, ...],
    apply: Callable[[Any, HttpRequest], bool],
    refused: type[Exception],
    done_message: str,
    skipped_message: str,
) -> Callable[[Any, HttpRequest, QuerySet[Any]], None]:
    """An admin action moving each selected record to ``to_status`` through
    its transition service (``apply(pk, request)``), logging each change;
    records whose status does not allow it are skipped and counted."""

    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        done = skipped = 0
        for record in queryset.select_related(None).only("pk", "status"):
            changed = False
            if record.status in from_statuses:
                with contextlib.suppress(refused):  # moved on since the list was loaded
                    changed = apply(record.pk, request)
            if changed:
                done += 1
                modeladmin.log_change(request, record, f"{description} ({record.status} → {to_status})")
            else:
                skipped += 1
        if done:
            modeladmin.message_user(request, done_message.format(description=description, count=done), messages.SUCCESS)
        if skipped:
            modeladmin.message_user(request, skipped_message.format(count=skipped), messages.WARNING)

    action.__name__ = name
    return admin.action(description=description, permissions=["change"])(action)
