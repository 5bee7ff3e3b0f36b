"""MED 2.0 infractions: a payer's fraud claim on a Pix a merchant received,
the cautionary block of its money, the merchant's defence and the return
(docs/api/infractions.md)."""
