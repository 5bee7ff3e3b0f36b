"""An infraction as merchants read it: the API's record and the ``data`` of
an ``infraction`` webhook (same fields; timestamps in
``REST_FRAMEWORK["DATETIME_FORMAT"]``, local time, as every record's)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from infractions.choices import InfractionStatus
from infractions.models import Infraction


class InfractionDefenseSerializer(serializers.Serializer[Infraction]):
    submitted_at = serializers.DateTimeField(source="defense_submitted_at")
    sent_at = serializers.DateTimeField(
        source="defense_sent_at", allow_null=True, help_text="When the acquirer took it; null until then."
    )
    text = serializers.CharField(source="defense_text")
    error = serializers.CharField(
        source="defense_error",
        help_text="Why the acquirer refused it (empty unless refused): a new defence may then be sent.",
    )
    attachments = serializers.SerializerMethodField()

    def get_attachments(self, infraction: Infraction) -> list[dict[str, Any]]:
        attachments = infraction.attachments.all()
        if "attachments" not in getattr(infraction, "_prefetched_objects_cache", {}):
            # One infraction (a webhook): its files' names only, never their content
            # (up to 2 MB each). A listing prefetched them already, without content
            # (infractions.selectors.infractions_of): no query per infraction.
            attachments = attachments.only("name", "content_type", "size")
        return [{"name": a.name, "content_type": a.content_type, "size": a.size} for a in attachments]


class InfractionPayloadSerializer(serializers.Serializer[Infraction]):
    id = serializers.UUIDField()
    transaction_id = serializers.UUIDField(source="charge_id", allow_null=True)
    e2e_id = serializers.CharField()
    status = serializers.ChoiceField(choices=InfractionStatus.choices)
    reason = serializers.CharField()
    amount = serializers.IntegerField(help_text="Disputed, centavos.")
    blocked_amount = serializers.IntegerField(
        source="hold", help_text="Kept back from the balance while it is open (the cautionary block), centavos."
    )
    returned_amount = serializers.IntegerField(help_text="Returned to the payer by the MED, centavos.")
    debited_amount = serializers.IntegerField(help_text="Debited from the balance for the return, centavos.")
    defense_deadline = serializers.DateTimeField(allow_null=True)
    defense = serializers.SerializerMethodField()
    opened_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)

    def get_defense(self, infraction: Infraction) -> dict[str, Any] | None:
        if infraction.defense_submitted_at is None:
            return None
        return dict(InfractionDefenseSerializer(infraction).data)


def infraction_payload(infraction: Infraction) -> dict[str, Any]:
    """The infraction as it is now."""
    return dict(InfractionPayloadSerializer(infraction).data)
