"""Webhook endpoints of an account. Events and deliveries arrive with the
webhooks issue; endpoints exist now because operators register them."""

from __future__ import annotations

import uuid

from django.db import models

from accounts.models import Account
from pix_service.tokens import new_webhook_code, new_webhook_secret


class WebhookEndpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="webhook_endpoints")
    ref = models.CharField(max_length=64, blank=True, help_text="Operator reference (pix_bootstrap).")
    url = models.URLField(max_length=2000)
    # Sent as X-Webhook-Code so receivers can recognise us cheaply.
    code = models.CharField(max_length=64, default=new_webhook_code)
    # Standard Webhooks signing secret; needed in clear to sign, shown once.
    secret = models.CharField(max_length=100, default=new_webhook_secret)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "endpoint de webhook"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "ref"], condition=~models.Q(ref=""), name="webhook_unique_ref_per_account"
            ),
        ]

    def __str__(self) -> str:
        return self.url
