"""The webhook endpoints' OpenAPI examples (webhooks/apis.py), each valid
as it stands against the demo account of ``make run``
(``tests/platform/test_docs_examples.py`` sends them)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

from api.schema import enum_descriptions

#: postprocessing hook (config/settings: POSTPROCESSING_HOOKS).
describe_enums = enum_descriptions(
    {
        "DeliveryStatusEnum": (
            "`pending`: not yet delivered (retrying with backoff). `succeeded`: the receiver answered 2xx. "
            "`failed`: gave up after the last attempt (or the endpoint was disabled)."
        ),
    }
)

WEBHOOK_ENDPOINT = [
    OpenApiExample(
        "Endpoint",
        summary="Where signed events are sent (https)",
        value={"url": "https://loja.example.com/webhooks/pix", "description": "Loja: pedidos"},
        request_only=True,
    ),
]
