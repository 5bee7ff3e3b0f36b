"""Charges an open MED infraction holds (``Charge.med_open``): the charge
list's money actions (mark a chargeback, ask to resolve one, refund) leave
them as they are and say why, in staff's words, instead of counting them as
"ignored" or asking a second staff member for something the infraction
decides. The infraction's own page (Infrações MED) is where staff act."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from payments import exceptions as err

#: What staff read for each charge the action left alone.
MED_OPEN_REFUSED = f"{err.MED_OPEN} Nada foi alterado; acompanhe a infração em Infrações MED."

Action = Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None]


def refusing_med_open(action: Action) -> Action:
    """``action`` on the selected charges no open infraction holds; each one
    it holds is reported, unchanged. The charge's transition service refuses
    them too (under the charge's lock): this is what staff read, and no
    request is made for a second staff member to approve in vain."""

    @functools.wraps(action)
    def guarded(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        held = list(queryset.filter(med_open=True).order_by("pk").values_list("pk", flat=True))
        for pk in held:
            modeladmin.message_user(request, f"Cobrança {pk}: {MED_OPEN_REFUSED}", messages.ERROR)
        free = queryset.filter(med_open=False)
        if held and not free.exists():
            return None
        return action(modeladmin, request, free)

    return guarded
