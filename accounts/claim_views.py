"""The page a merchant opens from a credential's claim link: outside the
back office, no login (the link's token is the proof), pt-BR, never cached.

GET only shows what is being claimed and a button: a mail scanner or a
link preview that fetches the link consumes nothing. The POST claims it
(``accounts.credential_links.credential_claim``) and its answer shows the
secret, once: it is stored nowhere, so reloading re-posts and finds the link
used."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from accounts.credential_links import CLAIM_UNKNOWN, credential_claim, credential_link_check
from accounts.exceptions import ClaimRefused
from accounts.models import ApiCredential

TEMPLATE = "claim/credential.html"


def _page(request: HttpRequest, context: dict[str, object], status: int = 200) -> HttpResponse:
    response = TemplateResponse(request, TEMPLATE, context, status=status)
    # The secret (or the token, in the address) must not be kept by a cache
    # or sent on to another site, nor the page indexed.
    response["Cache-Control"] = "no-store, private"
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


def _refused(request: HttpRequest, refused: ClaimRefused) -> HttpResponse:
    status = 404 if refused.code == CLAIM_UNKNOWN else 410
    return _page(request, {"state": "refused", "message": refused.message, "code": refused.code}, status)


def _shown(credential: ApiCredential) -> dict[str, object]:
    return {
        "account": credential.account.name,
        "permission": credential.get_permission_display(),
        "public_key": credential.public_key,
    }


@require_http_methods(["GET", "POST"])
def credential_claim_view(request: HttpRequest, token: str) -> HttpResponse:
    try:
        if request.method == "POST":
            claimed = credential_claim(token=token)
            return _page(request, {"state": "claimed", **_shown(claimed.credential), "secret_key": claimed.secret_key})
        link = credential_link_check(token=token)
    except ClaimRefused as refused:
        return _refused(request, refused)
    return _page(
        request, {"state": "ask", **_shown(link.credential), "expires_at": timezone.localtime(link.expires_at)}
    )
