"""Request and response shapes of the infraction endpoints, and the body of
an ``infraction`` webhook for the API docs."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import SharedFieldsSerializer, StrictCharField, StrictChoiceField
from infractions.models import Infraction
from infractions.payloads import InfractionDefenseSerializer, InfractionPayloadSerializer

DEFENSE_TEXT_MAX_LENGTH = 5000
MAX_ATTACHMENTS = 5
#: Decoded sizes: each attachment, and all of a defence's together. The body
#: carries them in base64 (4/3 larger): config's API_MAX_BODY_BYTES_BY_PATH
#: lets that route's body be that large (7 MiB), no other.
ATTACHMENT_MAX_BYTES = 2 * 1024 * 1024
DEFENSE_MAX_BYTES = 5 * 1024 * 1024
#: Each accepted type, and how its files begin: a file whose bytes are not of
#: its declared type is refused here, not by the acquirer days later.
ATTACHMENT_TYPES = {"application/pdf": b"%PDF-", "image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}

ATTACHMENT_TOO_LARGE = "Cada anexo pode ter no máximo 2 MB."
ATTACHMENTS_TOO_LARGE = "Os anexos somam mais de 5 MB."
TOO_MANY_ATTACHMENTS = f"Envie no máximo {MAX_ATTACHMENTS} anexos."
NOT_BASE64 = "Informe o conteúdo do arquivo em base64."
EMPTY_ATTACHMENT = "O anexo está vazio."
WRONG_CONTENT = "O conteúdo não é um arquivo do tipo informado em content_type."


class AttachmentSerializer(serializers.Serializer[Any]):
    name = StrictCharField(max_length=200, help_text="The file's name, as the acquirer will show it.")
    content_type = StrictChoiceField(choices=list(ATTACHMENT_TYPES))
    content_base64 = StrictCharField(
        help_text="The file, base64 (RFC 4648, with padding). At most 2 MB decoded; 5 MB for all of them."
    )

    def validate_content_base64(self, value: str) -> bytes:
        try:
            content = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError(NOT_BASE64) from None
        if not content:
            raise serializers.ValidationError(EMPTY_ATTACHMENT)
        if len(content) > ATTACHMENT_MAX_BYTES:
            raise serializers.ValidationError(ATTACHMENT_TOO_LARGE)
        return content

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs["content_base64"].startswith(ATTACHMENT_TYPES[attrs["content_type"]]):
            raise serializers.ValidationError({"content_base64": [WRONG_CONTENT]})
        return attrs


class DefenseCreateSerializer(SharedFieldsSerializer):
    """The defence of an infraction: its text and the files that back it."""

    text = StrictCharField(
        max_length=DEFENSE_TEXT_MAX_LENGTH,
        help_text="The merchant's account of the sale (what was sold, to whom, how it was delivered), "
        f"1 to {DEFENSE_TEXT_MAX_LENGTH} characters.",
    )
    attachments = AttachmentSerializer(  # type: ignore[call-arg]  # DRF's ListSerializer takes max_length
        many=True,
        required=False,
        max_length=MAX_ATTACHMENTS,
        help_text=f"Evidence: 0 to {MAX_ATTACHMENTS} files (PDF, PNG or JPEG).",
    )

    def validate_attachments(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if sum(len(a["content_base64"]) for a in value) > DEFENSE_MAX_BYTES:
            raise serializers.ValidationError(ATTACHMENTS_TOO_LARGE)
        return value


class DefenseAttachmentSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    content_type = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes.")


class DefenseSerializer(serializers.Serializer[Any]):
    """The defence as the API shows it (the documented shape of ``defense``)."""

    submitted_at = serializers.DateTimeField(help_text="When the merchant (or staff on its behalf) sent it.")
    sent_at = serializers.DateTimeField(allow_null=True, help_text="When the acquirer took it; null until then.")
    text = serializers.CharField()
    error = serializers.CharField(
        help_text="Why the acquirer refused it (empty unless refused): a new defence may then be sent."
    )
    attachments = DefenseAttachmentSerializer(
        many=True, help_text="The files sent with it (their content is not shown)."
    )


class InfractionSerializer(InfractionPayloadSerializer):
    """An infraction as the API reads it: exactly what its webhook's ``data``
    carries (:func:`infractions.payloads.infraction_payload`)."""

    @extend_schema_field(DefenseSerializer(allow_null=True, help_text="The defence; null until one is sent."))
    def get_defense(self, infraction: Infraction) -> dict[str, Any] | None:
        if infraction.defense_submitted_at is None:
            return None
        return dict(InfractionDefenseSerializer(infraction).data)


class InfractionEventDataSerializer(InfractionSerializer):
    """An ``infraction`` event's ``data``: the record, the event's name and
    (deadline notices) the hours left. For the docs only: ``defense`` is a
    plain field here, since a callback's request body leaves read-only ones out."""

    defense = DefenseSerializer(allow_null=True, help_text="The defence; null until one is sent.")  # type: ignore[assignment]
    event = serializers.ChoiceField(
        choices=["infraction.opened", "infraction.deadline", "infraction.closed", "infraction.returned"],
        help_text="`opened`: reported by the acquirer (with its block). `deadline`: the defence's deadline is "
        "48, 24 or 6 hours away and no defence was sent. `closed`: decided (`status` says how). `returned`: "
        "more money went back to the payer after the close (MED 2.0 follows the money).",
    )
    hours_left = serializers.IntegerField(
        required=False,
        help_text="`infraction.deadline` only: the notice's threshold, 48, 24 or 6 (the deadline is at most that "
        "many hours away).",
    )


class InfractionEventSerializer(serializers.Serializer[Any]):
    """The body of an ``infraction`` webhook, for the API docs (the envelope
    itself is ``WebhookEvent.body``)."""

    id = serializers.UUIDField(help_text="The event's id: the same on every attempt (`webhook-id`).")
    event_type = serializers.ChoiceField(choices=["infraction"])
    data = InfractionEventDataSerializer(help_text="The infraction as it is after the change.")  # type: ignore[assignment]
