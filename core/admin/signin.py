"""Staff sign-in: the client address django-axes counts failures against."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def login_client_address(request: HttpRequest) -> str | None:
    """The address django-axes counts a staff login's failures against.

    Behind the TLS proxy (``TRUST_X_FORWARDED_PROTO``) every request comes
    from the proxy's address, so REMOTE_ADDR would let anyone lock any staff
    member out; the proxy appends the address it saw to X-Forwarded-For, and
    only that right-most entry is its word (the ones before it are the
    client's). Without a proxy the header is the client's to forge."""
    address: str | None = request.META.get("REMOTE_ADDR")
    if getattr(settings, "TRUST_X_FORWARDED_PROTO", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        address = forwarded or address
    return address
