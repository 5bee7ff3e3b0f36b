"""The acquirer listing's measured conversion: of the charges each acquirer
took, how many were paid (interface spec: ``conversion_percent``).

Here rather than in ``acquirers`` because it is read from charges (acquirers
sit below payments); the result is stored on the acquirer by
:func:`acquirers.services.acquirer_conversions_record`.

What counts, per acquirer:

- charges *created* in the last ``PIX_CONVERSION_WINDOW_DAYS`` days whose
  *expiry has passed*. A charge still inside its expiry has no outcome yet,
  paid or not: counting only the paid ones among those would inflate the
  rate, counting the pending ones as failures would deflate it. So every
  charge joins the sample once it expires, whatever its status (a charge paid
  in its first minute waits with the rest);
- converted: a charge that was ever paid (``paid_at`` is set once and kept),
  so a charge later refunded or under a chargeback still counts: the payer
  did pay at that acquirer, which is what the listing tells customers;
- below ``PIX_CONVERSION_MIN_SAMPLE`` such charges there is no measurement.

Cost: one aggregate query every run (beat, every 10 minutes), a range scan of
the window on ``charge_overview_day`` (created_at) with a heap read per
charge; no index was added for it, as every charge insert would pay for it.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from acquirers.services import acquirer_conversions_record
from payments.models import Charge


def conversion_counts(*, now: dt.datetime, window_days: int) -> dict[int, tuple[int, int]]:
    """acquirer id → (charges counted, of them paid), in one query
    (``GROUP BY acquirer_id`` with ``COUNT(*) FILTER``)."""
    since = now - dt.timedelta(days=max(window_days, 1))
    rows = (
        Charge.objects.filter(created_at__gte=since, expires_at__lte=now)
        .order_by()
        .values("acquirer_id")
        .annotate(created=Count("pk"), paid=Count("pk", filter=Q(paid_at__isnull=False)))
        .values_list("acquirer_id", "created", "paid")
    )
    return {acquirer_id: (created, paid) for acquirer_id, created, paid in rows}


def acquirers_conversion_measure(*, now: dt.datetime | None = None) -> int:
    """Measure every acquirer's conversion now and store it. Idempotent.
    Returns how many acquirers' values changed."""
    moment = now or timezone.now()
    counts = conversion_counts(now=moment, window_days=settings.PIX_CONVERSION_WINDOW_DAYS)
    return acquirer_conversions_record(counts=counts, min_sample=settings.PIX_CONVERSION_MIN_SAMPLE, measured_at=moment)
