"""The acquirer selection endpoint's OpenAPI examples (acquirers/apis.py),
each valid as it stands against the demo account of ``make run``
(demo/bootstrap.json: its acquirers ``sandbox_alpha``, ``sandbox_beta`` and
``sandbox_gamma``; ``tests/platform/test_docs_examples.py`` sends them)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

ACQUIRER_SELECTION = [
    OpenApiExample(
        "Cadeia completa",
        summary="The account's chain, up to three acquirers by priority",
        value={
            "acquirers": [
                {"acquirer_key": "sandbox_alpha", "priority": 1},
                {"acquirer_key": "sandbox_beta", "priority": 2},
            ]
        },
        request_only=True,
    ),
    OpenApiExample(
        "Um adquirente numa posição",
        summary="Put one acquirer at one priority",
        value={"acquirer_key": "sandbox_gamma", "priority": 3},
        request_only=True,
    ),
]
