"""Reconciliation is tested against the same fake acquirers (API Pix PSP
behind mTLS, Efí) as the acquirer tests: their fixtures, shared."""

from __future__ import annotations

from tests.acquirers.conftest import (  # noqa: F401 - fixtures
    account,
    bacen_acquirer,
    efi_acquirer,
    fake_efi,
    fake_psp,
    make_bacen_acquirer,
    make_efi_acquirer,
    one_ask_acquirer,
)
