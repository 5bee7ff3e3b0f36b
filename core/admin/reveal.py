"""Secrets shown once in the back office (a webhook endpoint's signing
secret, the postback secret, staff's recovery codes): Post/Redirect/Get to
a page that shows them once, to the session that made them."""

from __future__ import annotations

import secrets
import time
from typing import Any

from django.contrib import admin, messages
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.cache import add_never_cache_headers

#: Session keys of the tokens of secrets waiting for the page that shows them once.
REVEAL_PREFIX = "pix_admin_reveal:"
#: A secret not read within this many seconds of its POST is dropped unseen.
REVEAL_MAX_AGE = 600


def reveal_later(
    request: HttpRequest, *, template: str, context: dict[str, Any], url_name: str, back_url: str
) -> HttpResponse:
    """Post/Redirect/Get for a page that shows a new secret: the answer to the
    POST is a 303 to the page that shows it once (:func:`reveal_view`).
    Reloading that page shows nothing again and never repeats the POST (no
    second credential, no second rotation).

    The secret waits in the cache (Redis), which drops it after
    ``REVEAL_MAX_AGE`` whether or not the page is opened; the session (a
    database row, signed but not encrypted, as long-lived as the login) holds
    only the random token, which also binds the page to this staff member."""
    now = time.time()
    for key, at in list(request.session.items()):
        # Not a number: a secret itself, stored here by an earlier release.
        if key.startswith(REVEAL_PREFIX) and (not isinstance(at, float) or now - at > REVEAL_MAX_AGE):
            del request.session[key]
    token = secrets.token_urlsafe(18)
    cache.set(
        REVEAL_PREFIX + token,
        {"template": template, "context": {**context, "back_url": back_url}},
        timeout=REVEAL_MAX_AGE,
    )
    request.session[REVEAL_PREFIX + token] = now
    response = HttpResponseRedirect(reverse(url_name, args=[token]))
    response.status_code = 303
    return response


def take_revealed(request: HttpRequest, token: str) -> dict[str, Any] | None:
    """What :func:`reveal_later` stored under ``token`` for this session,
    removed as it is read: ``None`` once read, expired, or another session's."""
    stored: dict[str, Any] | None = None
    if request.session.pop(REVEAL_PREFIX + token, None) is not None:
        stored = cache.get(REVEAL_PREFIX + token)
        cache.delete(REVEAL_PREFIX + token)
    return stored


def shown_once(request: HttpRequest, template: str, context: dict[str, Any]) -> TemplateResponse:
    """The page that shows a secret: kept by no cache, the browser's included."""
    response = TemplateResponse(request, template, context)
    add_never_cache_headers(response)
    response["Cache-Control"] = "no-store"
    return response


def reveal_view(modeladmin: Any, request: HttpRequest, token: str) -> HttpResponse:
    """Shows what :func:`reveal_later` stored, once, to the session that
    stored it: it is removed as it is read, and the page is never cached."""
    stored = take_revealed(request, token)
    if stored is None:
        modeladmin.message_user(
            request,
            "Este segredo já foi exibido e não é mostrado de novo. Se não foi copiado, rotacione-o.",
            messages.WARNING,
        )
        opts = modeladmin.model._meta
        return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    context = {**modeladmin.admin_site.each_context(request), "opts": modeladmin.model._meta, **stored["context"]}
    return shown_once(request, stored["template"], context)


def reveal_url(modeladmin: Any) -> URLPattern:
    """The URL of ``modeladmin``'s reveal page (before the admin's catch-all)."""
    opts = modeladmin.model._meta

    def view(request: HttpRequest, token: str) -> HttpResponse:
        return reveal_view(modeladmin, request, token)

    name = f"{opts.app_label}_{opts.model_name}_reveal"
    site: admin.AdminSite = modeladmin.admin_site
    return path("reveal/<str:token>/", site.admin_view(view), name=name)
