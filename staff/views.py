"""The back office's second sign-in step and the pages around it, in pt-BR:
the code after the password, enrolling an authenticator app (QR code and
secret), new recovery codes shown once. Thin: ``staff.services`` decides.

These pages sit in the admin's URLs (``PixAdminSite.get_urls``); the first
two serve a member past the password and not yet past the code, which the
admin's own pages refuse."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

import django_otp
import segno
from axes.helpers import get_client_ip_address, get_lockout_response
from axes.utils import reset as axes_reset
from django.contrib import admin, messages
from django.contrib.auth import REDIRECT_FIELD_NAME, logout
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from core.admin.reveal import reveal_later, shown_once, take_revealed
from staff.access import second_factor_passed
from staff.forms import CODE_FIELD, CodeForm
from staff.selectors import has_second_factor, recovery_codes_left, second_step_locked_until
from staff.services import (
    CodeCheck,
    enrolment_device,
    recovery_codes_regenerate,
    second_factor_enrol,
    second_factor_verify,
)

WRONG_CODE = (
    "Código incorreto ou expirado. Confira o código no aplicativo autenticador (e a hora do celular) e tente de novo."
)
WAIT = "Muitos códigos incorretos seguidos: aguarde alguns segundos e tente de novo."
LOCKED = "Muitos códigos de verificação incorretos seguidos para este usuário."
SHOWN_TEMPLATE = "admin/staff/recovery_codes_shown.html"

View = Callable[..., HttpResponse]


def next_url(request: HttpRequest) -> str:
    """Where the member was going: a path of this site, or the index."""
    wanted = request.POST.get(REDIRECT_FIELD_NAME) or request.GET.get(REDIRECT_FIELD_NAME) or ""
    if url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return wanted
    return reverse("admin:index")


def with_next(url_name: str, wanted: str) -> str:
    return f"{reverse(url_name)}?{urlencode({REDIRECT_FIELD_NAME: wanted}, safe='/')}"


def to_second_step(request: HttpRequest, answer: HttpResponse) -> HttpResponse:
    """Where the admin's login sends a member once past the password (its
    ``answer`` says where they were going): the code, or enrolment."""
    wanted = answer.url if isinstance(answer, HttpResponseRedirect) else next_url(request)
    return HttpResponseRedirect(with_next("admin:otp_verify", wanted))


def member_only(view: View) -> View:
    """An active staff member past the password, verified or not; never cached."""

    @wraps(view)
    def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        user = request.user
        if not (user.is_authenticated and user.is_active and user.is_staff):
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        return view(request, *args, **kwargs)

    return never_cache(inner)


def page(
    request: HttpRequest, site: admin.AdminSite, template: str, context: dict[str, Any], status: int = 200
) -> TemplateResponse:
    return TemplateResponse(request, template, {**site.each_context(request), **context}, status=status)


def locked(request: HttpRequest, site: admin.AdminSite, until: dt.datetime) -> HttpResponse:
    """Signed out onto the lockout page: no session waits at the code step while it is locked."""
    logout(request)
    return page(request, site, "admin/locked_out.html", {"lockout_message": LOCKED, "locked_until": until}, 429)


def refused(request: HttpRequest, site: admin.AdminSite, form: CodeForm, checked: CodeCheck) -> HttpResponse | None:
    """A code refused. django-axes counts it as a failed login of this member
    from this address (its lockout then refuses the password too); past the
    limit of wrong codes in a row (from anywhere) the member is signed out
    onto the lockout page. Otherwise the form says why, in pt-BR."""
    user = request.user
    credentials = {"username": user.get_username()}
    user_login_failed.send(sender=__name__, credentials=credentials, request=request)
    if getattr(request, "axes_locked_out", False):
        logout(request)
        lockout: HttpResponse = get_lockout_response(request, None, credentials)
        return lockout
    if (until := second_step_locked_until(user)) is not None:
        return locked(request, site, until)
    form.add_error(CODE_FIELD, WAIT if checked.wait_until is not None else WRONG_CODE)
    return None


def code_step(
    request: HttpRequest,
    site: admin.AdminSite,
    check: Callable[[str], CodeCheck],
    passed: Callable[[CodeCheck], HttpResponse],
) -> CodeForm | HttpResponse:
    """The code form of a page. While the member is locked out, the lockout
    page; a submitted code is checked by ``check``: a right one answers with
    ``passed(checked)``, a wrong one is refused (counted, perhaps locking the
    member out). Otherwise the form to show, its error included."""
    if (until := second_step_locked_until(request.user)) is not None:
        return locked(request, site, until)
    form = CodeForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        checked = check(form.cleaned_data[CODE_FIELD])
        if checked.device is not None:
            return passed(checked)
        if (answer := refused(request, site, form, checked)) is not None:
            return answer
    return form


def signed_in(request: HttpRequest, checked: CodeCheck) -> None:
    """The session is verified by ``checked.device``: a new session id (a
    privilege gained), and the failures django-axes counted for this member
    at this address since the password are forgiven, as after a password."""
    user = request.user
    django_otp.login(request, checked.device)
    request.session.cycle_key()
    axes_reset(ip=get_client_ip_address(request), username=user.get_username())
    if checked.by_recovery_code:
        messages.warning(
            request,
            "Você entrou com um código de recuperação, que não vale mais. Códigos restantes: "
            f"{recovery_codes_left(user)}. Perdeu o celular? Peça a um administrador que redefina "
            "a sua verificação em duas etapas.",
        )


def show_recovery_codes(request: HttpRequest, codes: list[str], *, back: str, enrolled: bool = False) -> HttpResponse:
    context = {"codes": codes, "enrolled": enrolled}
    return reveal_later(
        request, template=SHOWN_TEMPLATE, context=context, url_name="admin:otp_recovery_codes_shown", back_url=back
    )


def verify_view(request: HttpRequest, site: admin.AdminSite) -> HttpResponse:
    """The second step: a code from the authenticator app, or a recovery code."""
    wanted = next_url(request)
    user = request.user
    if second_factor_passed(request):
        return HttpResponseRedirect(wanted)
    if not has_second_factor(user):
        return HttpResponseRedirect(with_next("admin:otp_enrol", wanted))

    def passed(checked: CodeCheck) -> HttpResponse:
        signed_in(request, checked)
        return HttpResponseRedirect(wanted)

    form = code_step(request, site, lambda code: second_factor_verify(user=user, code=code), passed)
    if isinstance(form, HttpResponse):
        return form
    context = {"title": "Verificação em duas etapas", "form": form, "next": wanted, "username": user.get_username()}
    return page(request, site, "admin/staff/second_step.html", context)


def enrol_view(request: HttpRequest, site: admin.AdminSite) -> HttpResponse:
    """A member without an authenticator app adds one: QR code and secret,
    then a code it shows; then their recovery codes, shown once."""
    wanted = next_url(request)
    user = request.user
    if has_second_factor(user):  # a new app only after a colleague's reset
        return HttpResponseRedirect(with_next("admin:otp_verify", wanted))

    def passed(checked: CodeCheck) -> HttpResponse:
        signed_in(request, checked)
        return show_recovery_codes(request, checked.recovery_codes, back=wanted, enrolled=True)

    form = code_step(request, site, lambda code: second_factor_enrol(user=user, code=code), passed)
    if isinstance(form, HttpResponse):
        return form
    device = enrolment_device(user=user)
    secret = base64.b32encode(device.bin_key).decode()
    context = {
        "title": "Configurar a verificação em duas etapas",
        "form": form,
        "next": wanted,
        # An image in the page itself: the secret never leaves for a QR service or a CDN.
        "qr_code": segno.make(device.config_url, error="m").svg_data_uri(scale=5),
        "secret": " ".join(secret[i : i + 4] for i in range(0, len(secret), 4)),
    }
    return page(request, site, "admin/staff/enrol.html", context)


def recovery_codes_view(request: HttpRequest, site: admin.AdminSite) -> HttpResponse:
    """A verified member's second factor: recovery codes left, and new ones
    after a code from the app (a recovery code cannot make more)."""
    user = request.user

    def passed(checked: CodeCheck) -> HttpResponse:
        codes = recovery_codes_regenerate(user=user)
        return show_recovery_codes(request, codes, back=reverse("admin:otp_recovery_codes"))

    form = code_step(request, site, lambda code: second_factor_verify(user=user, code=code, app_only=True), passed)
    if isinstance(form, HttpResponse):
        return form
    context = {
        "title": "Verificação em duas etapas",
        "form": form,
        "enrolled": has_second_factor(user),
        "left": recovery_codes_left(user),
    }
    return page(request, site, "admin/staff/recovery_codes.html", context)


def recovery_codes_shown_view(request: HttpRequest, token: str, site: admin.AdminSite) -> HttpResponse:
    stored = take_revealed(request, token)
    if stored is None:
        messages.warning(
            request, "Estes códigos já foram exibidos e não são mostrados de novo. Se não foram guardados, gere novos."
        )
        return HttpResponseRedirect(reverse("admin:otp_recovery_codes"))
    context = {**site.each_context(request), "title": "Códigos de recuperação", **stored["context"]}
    return shown_once(request, stored["template"], context)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Leave at the code step (the admin's own logout needs a verified session)."""
    logout(request)
    return HttpResponseRedirect(reverse("admin:login"))


def second_factor_urls(site: admin.AdminSite) -> list[URLPattern]:
    """The pages above, for ``site.get_urls`` (before its catch-all)."""
    own = {"site": site}
    return [
        path("otp/", member_only(verify_view), own, name="otp_verify"),
        path("otp/enrol/", member_only(enrol_view), own, name="otp_enrol"),
        path("otp/logout/", member_only(logout_view), name="otp_logout"),
        path("otp/recovery-codes/", site.admin_view(recovery_codes_view), own, name="otp_recovery_codes"),
        path(
            "otp/recovery-codes/<str:token>/",
            site.admin_view(recovery_codes_shown_view),
            own,
            name="otp_recovery_codes_shown",
        ),
    ]
