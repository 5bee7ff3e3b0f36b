"""The OpenAPI schema's settings (drf-spectacular): what /api/schema/ and
Swagger UI show, in the order a merchant works."""

SPECTACULAR_SETTINGS = {
    "TITLE": "PIX Service API",
    "DESCRIPTION": (
        "PIX charges (cash-in), withdrawals (cash-out), acquirer selection, balance and "
        "webhooks. Every request carries `X-Public-Key` and `X-Secret-Key`. Money is in "
        "integer centavos; timestamps are `YYYY-MM-DD HH:mm:ss` in America/Sao_Paulo."
    ),
    "VERSION": "1.0.0",
    # In the order a merchant works; what only PSPs call, last (Swagger UI
    # shows tags in this order).
    "TAGS": [
        {"name": "transactions", "description": "PIX charges (cash-in): create, read, list, QR code."},
        {"name": "withdrawals", "description": "PIX withdrawals (cash-out) debited from the balance."},
        {"name": "balance", "description": "Available balance and withdrawal limits."},
        {"name": "acquirers", "description": "The acquirers the account may use, and its default chain."},
        {"name": "webhooks", "description": "Endpoints that receive signed events, and their deliveries."},
        {
            "name": "due-charges",
            "description": "Due-date charges (API Pix cobv): invoices payable after their due date with fine, "
            "interest and discounts; create, read, list, cancel, CSV.",
        },
        {
            "name": "recurrences",
            "description": "Automatic Pix (API Pix rec, cobr): the payer authorises once at their bank, then each "
            "cycle is charged on its due date; create, read, list, cancel, cycles and their amounts.",
        },
        {"name": "infractions", "description": "MED fraud claims on Pix received: blocks, defence, returns."},
        {
            "name": "sandbox",
            "description": "Sandbox only (PIX_SANDBOX): pay, fail or refund a test charge; "
            "the payer's bank of a test recurrence.",
        },
        {"name": "health", "description": "Liveness and readiness, for orchestrators."},
        {"name": "psp-callbacks", "description": "Notifications that acquirers (PSPs) send; not for merchants."},
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api",
    "PARSER_WHITELIST": ["api.parsers.JSONObjectParser"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI assets ship with the sidecar package instead of a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One named enum per choice set, shared by every field that uses it.
    "ENUM_NAME_OVERRIDES": {
        "ChargeStatusEnum": "payments.models.ChargeStatus",
        "WithdrawalStatusEnum": "withdrawals.models.WithdrawalStatus",
        "PixKeyTypeEnum": "withdrawals.models.PixKeyType",
        "DeliveryStatusEnum": "webhooks.models.WebhookDelivery.Status",
        "LedgerKindEnum": "accounts.models.LedgerKind",
        "InfractionStatusEnum": "infractions.choices.InfractionStatus",
    },
    # The choices' labels are the back office's pt-BR; the API's documentation
    # is English: each app describes its enums beside its views instead.
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "payments.examples.describe_enums",
        "withdrawals.examples.describe_enums",
        "webhooks.examples.describe_enums",
        "infractions.examples.describe_enums",
        "api.schema.drop_field_titles",
    ],
    # The schema and Swagger UI are public; the API they describe is not.
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
}
