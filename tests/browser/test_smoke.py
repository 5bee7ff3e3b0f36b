"""The browser harness itself: a logged-in staff member reaches the back office."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import screenshot


def test_staff_member_sees_the_back_office_index(staff_page: Any, admin_url: Any) -> None:
    page = staff_page(superuser=True)
    response = page.goto(admin_url())
    assert response.status == 200
    expect(page.locator("#site-name")).to_be_visible()
    assert screenshot(page, "admin-index").stat().st_size > 0
    assert page.errors == []
