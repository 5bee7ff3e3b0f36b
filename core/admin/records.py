"""Records staff read rather than edit: evidence and money records, the ones
that move only through their actions, history inlines, and search by UUID."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

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


class ActionsOnlyAdminMixin:
    """Records that move only through their admin actions and services
    (charges, withdrawals): every field read-only, none added or deleted by
    hand. Unlike :class:`ReadOnlyAdminMixin` the change permission stays:
    the actions ask for it."""

    #: Set by ModelAdmin.
    model: type[Any]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
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
