"""Batches sent as a lotecobv are tested against the acquirer tests' fake API
Pix PSP (behind mTLS): their fixtures, shared."""

from __future__ import annotations

from tests.acquirers.conftest import fake_psp, make_bacen_acquirer  # noqa: F401 - fixtures
