"""Reads shared by the apps."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet

from core.exceptions import NotFoundError

M = TypeVar("M", bound=Model)


def get_by_uuid(queryset: QuerySet[M], raw_id: Any, not_found: type[NotFoundError]) -> M:
    """The row of ``queryset`` (already scoped to the account) with this id;
    ``not_found`` for unknown, malformed or someone else's ids alike, so
    nothing about other accounts shows from outside."""
    try:
        key = uuid.UUID(str(raw_id))
    except ValueError:
        raise not_found() from None
    try:
        return queryset.get(pk=key)  # no ORDER BY, unlike .first()
    except ObjectDoesNotExist:
        raise not_found() from None
