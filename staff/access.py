"""Whether a request's staff session has passed the second factor: what the
back office's admin site asks before every page (``PixAdminSite``), as
django-otp's ``OTPAdminSite`` does, with the sign-in in two steps."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from staff.selectors import has_second_factor


def is_verified(user: Any) -> bool:
    """A code verified this session (django-otp's middleware says so). A user
    just logged in by password in this very request has no such flag yet."""
    check = getattr(user, "is_verified", None)
    return bool(check is not None and check())


def second_factor_passed(request: HttpRequest) -> bool:
    """The session may use the back office as far as the second factor goes.

    Required (``ADMIN_OTP_REQUIRED``, forced on in production): a code must
    have verified it. Optional (local settings only): a member who never
    enrolled passes on the password; one who enrolled still gives a code."""
    user = request.user
    if is_verified(user):
        return True
    return not settings.ADMIN_OTP_REQUIRED and not has_second_factor(user)


def awaiting_second_factor(request: HttpRequest) -> bool:
    """A staff member past the password and not yet past the second factor."""
    user = request.user
    return bool(user.is_authenticated and user.is_active and user.is_staff) and not second_factor_passed(request)
