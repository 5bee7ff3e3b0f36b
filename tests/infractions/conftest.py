"""Infractions are read from the same fake acquirers (Efí behind mTLS) as the
acquirer tests use: their fixtures, shared."""

from __future__ import annotations

from tests.acquirers.conftest import efi_acquirer, fake_efi, make_efi_acquirer  # noqa: F401 - fixtures
