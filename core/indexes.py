"""Indexes more than one model declares the same way."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


def record_listing_indexes(prefix: str) -> list[models.Index]:
    """The indexes of a record listing (GET /transactions, GET /withdrawals;
    ``api.listing.RecordFilterSet``): always one account, newest first
    (created_at, id), filtered by status, amount, paid_at and created_at in
    any combination.

    Each index leads with the account and one filter, and carries the order
    keys and the other filter columns, so the COUNT of the pagination and the
    page's keys are index-only scans whatever the combination; the table is
    read for the page's rows alone (api.listing's deferred join). Measured on
    1M charges in bench/listing.py. Named ``<prefix>_list_*``: the names are
    in the migrations.
    """
    return [
        models.Index(
            fields=["account", "-created_at", "-id"],
            include=["status", "amount", "paid_at"],
            name=f"{prefix}_list_recent",
        ),
        models.Index(
            fields=["account", "status", "-created_at", "-id"],
            include=["amount", "paid_at"],
            name=f"{prefix}_list_status",
        ),
        # Unpaid records have no paid_at and no paid_at filter matches them.
        models.Index(
            fields=["account", "paid_at"],
            include=["status", "amount", "created_at", "id"],
            condition=Q(paid_at__isnull=False),
            name=f"{prefix}_list_paid_at",
        ),
        models.Index(
            fields=["account", "amount"],
            include=["status", "paid_at", "created_at", "id"],
            name=f"{prefix}_list_amount",
        ),
    ]
