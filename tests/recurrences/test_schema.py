"""The schema documents exactly the shapes the API and the webhooks send
(recurrences.payloads): a field added to a payload and not to its
serializer, or the other way round, fails here."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from acquirers.models import Acquirer
from recurrences.serializers import CycleSerializer, RecurrenceSerializer
from tests.recurrences.helpers import URL, create, due_in, push_body
from webhooks.models import WebhookEvent

pytestmark = pytest.mark.django_db


def test_the_documented_fields_are_the_payloads(api: APIClient, acquirer: Acquirer) -> None:
    created = create(api)
    variable = api.post(URL, push_body(first_due_date=due_in(30).isoformat())).json()["data"]
    cycle = api.put(f"{URL}/{variable['id']}/cycles/0/amount", {"amount": 1000}, format="json").json()["data"]

    assert set(RecurrenceSerializer().fields) == set(created)
    assert set(CycleSerializer().fields) == set(cycle)
    sent: dict[str, Any] = WebhookEvent.objects.filter(event_type="recurrence_cycle").latest("created_at").body()
    assert set(sent) == {"id", "event_type", "data"}
    assert set(sent["data"]) == set(CycleSerializer().fields)


def test_the_create_operation_documents_both_webhooks(schema: dict[str, Any]) -> None:
    callbacks = schema["paths"]["/api/recurrences"]["post"]["callbacks"]

    assert {"recurrence event", "recurrence_cycle event"} <= set(callbacks)
