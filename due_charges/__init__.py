"""Due-date charges (API Pix ``cobv``) for merchants: their API, batches
(``lotecobv``) and back office. The charges themselves are
``payments.Charge`` rows of kind ``due`` with a ``payments.DueCharge``."""
