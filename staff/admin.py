"""Staff's second factor in the back office's user pages: whether each member
enrolled, and the reset of a colleague's (a lost phone). django-otp's own
device pages are taken off the site: they show an app's secret (and QR
code) and every recovery code to any superuser."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest, HttpResponse
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from core.admin.confirmation import confirmation_page, reason_form
from core.plural import plural
from staff.services import second_factor_reset

RESET = "Redefinir verificação em duas etapas"


class StaffUserAdmin(UserAdmin):  # type: ignore[type-arg]
    list_display = ("username", "email", "first_name", "last_name", "is_staff", "second_factor")
    actions = ["reset_second_factor"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[User]:
        enrolled = TOTPDevice.objects.filter(user=OuterRef("pk"), confirmed=True)
        users: QuerySet[User] = super().get_queryset(request).annotate(otp_enrolled=Exists(enrolled))
        return users

    @admin.display(description="Verificação em duas etapas", ordering="otp_enrolled")
    def second_factor(self, user: User) -> str:
        return "Configurada" if getattr(user, "otp_enrolled", False) else "Não configurada"

    # Whoever may change a user (set their password, groups, superuser flag)
    # may reset their second factor: it gives no power they lack. None of the
    # back-office groups may (accounts.staff_groups); superusers may.
    @admin.action(description=RESET, permissions=["change"])
    def reset_second_factor(self, request: HttpRequest, queryset: QuerySet[User]) -> HttpResponse | None:
        form = reason_form(request)
        if not form.is_valid():
            return confirmation_page(
                self,
                request,
                queryset,
                name="reset_second_factor",
                description=RESET,
                template="admin/auth/user/reset_second_factor.html",
                form=form,
                members=list(queryset.order_by("username")),
            )
        reset = 0
        for member in queryset.order_by("username"):
            if member.pk == request.user.pk:
                self.message_user(
                    request,
                    "A sua própria verificação em duas etapas só outro administrador redefine; nada mudou para você.",
                    messages.WARNING,
                )
                continue
            second_factor_reset(member=member, by=request.user, reason=form.cleaned_data["reason"])
            reset += 1
        if reset:
            done = plural(reset, "{n} membro da equipe", "{n} membros da equipe")
            self.message_user(
                request,
                f"Verificação em duas etapas redefinida: {done}; "
                "no próximo login, cada um configura um novo aplicativo.",
                messages.SUCCESS,
            )
        return None


def register(site: admin.AdminSite) -> None:
    """Staff's user pages with their second factor on ``site``; django-otp's device pages off it."""
    for model in (TOTPDevice, StaticDevice):
        if site.is_registered(model):
            site.unregister(model)
    if site.is_registered(User):
        site.unregister(User)
    site.register(User, StaffUserAdmin)
