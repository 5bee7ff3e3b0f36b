"""The anchor every API figure of ``make bench`` is a ratio to: a bare
Django + DRF project of its own (``bench.anchor.settings``: no middleware,
no project app, DEBUG off) answering ``GET /anchor/<id>`` with one
primary-key read of the row ``GET /api/transactions/{id}`` reads, rendered
by a DRF Response. What the service spends beyond it (its middleware,
authentication, rate limit, validation, serializers, writes) is what the
ratio shows, free of the project's own settings (issue 14).

It imports nothing of the project, so it measures the framework alone; the
server that runs it is in ``bench/anchor/server.py``.
"""

#: The columns of ``payments.serializers.ChargeSerializer.Meta.fields``, in
#: its order (bench/charges.py checks they still match).
COLUMNS = (
    "id",
    "payment_method",
    "e2e_id",
    "amount",
    "platform_tax",
    "liquid_amount",
    "status",
    "paid_at",
    "created_at",
    "expires_at",
)
TABLE = "payments_charge"
#: libpq's application_name of the anchor's connections (bench/cpu.py finds its backends by it).
APP_NAME = "pix-bench-anchor"
