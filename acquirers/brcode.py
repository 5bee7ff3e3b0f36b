"""BR Code (PIX "copia e cola") encoding and checking.

The format is EMV® QRCPS-MPM as profiled by Banco Central's BR Code manual:
a sequence of TLV fields ``IDLLvalue`` (two-digit id, two-digit length),
templates nested the same way, ending in field 63 (CRC16/CCITT-FALSE over
everything before its value, ``6304`` included).

``encode_dynamic`` writes the codes of our sandbox acquirer; ``check`` guards
every code any acquirer returns before a client sees it (decisions §4).
"""

from __future__ import annotations

import binascii
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

PIX_GUI = "br.gov.bcb.pix"
MAX_LENGTH = 512
_TEMPLATE_IDS = frozenset({f"{i:02d}" for i in (*range(26, 52), 62, *range(80, 100))})


class InvalidBRCode(ValueError):
    """The code is not a well-formed PIX BR Code (or not the one expected)."""


def crc16(data: str) -> str:
    """CRC16/CCITT-FALSE (poly 0x1021, init 0xFFFF), four upper-case hex digits.

    binascii's CRC-CCITT is that CRC given 0xFFFF as its start, in C: the
    bit loop in Python cost a charge about 3% of its CPU (make bench, py-spy),
    twice (our sandbox writes a code, and every code is checked)."""
    return f"{binascii.crc_hqx(data.encode('utf-8'), 0xFFFF):04X}"


def _field(field_id: str, value: str) -> str:
    if len(value) > 99:
        raise ValueError(f"field {field_id} longer than 99 characters")
    return f"{field_id}{len(value):02d}{value}"


def ascii_text(text: str, limit: int) -> str:
    """Upper-case ASCII without accents, cut to ``limit``: what every PIX reader accepts."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    cleaned = "".join(ch for ch in plain if 32 <= ord(ch) < 127).strip().upper()
    return cleaned[:limit].strip() or "NA"


def format_amount(amount: int) -> str:
    """Centavos → the BR Code's decimal string (``12345`` → ``123.45``)."""
    if amount <= 0:
        raise ValueError("amount must be positive")
    return f"{amount // 100}.{amount % 100:02d}"


def encode_dynamic(*, location: str, amount: int | None, merchant_name: str, merchant_city: str) -> str:
    """A dynamic BR Code: the payer's app fetches the charge at ``location``
    (a URL without scheme); the txid lives there, so field 62.05 is ``***``.
    ``amount`` None leaves field 54 out: the amount is the fetched payload's
    (a due-date charge's changes with the day it is paid on)."""
    if "://" in location:
        raise ValueError("location is written without its scheme")
    merchant_account = _field("00", PIX_GUI) + _field("25", location)
    payload = (
        _field("00", "01")
        + _field("01", "12")  # 12: the code is for one payment
        + _field("26", merchant_account)
        + _field("52", "0000")
        + _field("53", "986")
        + (_field("54", format_amount(amount)) if amount is not None else "")
        + _field("58", "BR")
        + _field("59", ascii_text(merchant_name, 25))
        + _field("60", ascii_text(merchant_city, 15))
        + _field("62", _field("05", "***"))
        + "6304"
    )
    code = payload + crc16(payload)
    if len(code) > MAX_LENGTH:
        raise ValueError("BR Code longer than 512 characters")
    return code


Fields = dict[str, "str | Fields"]


def _parse_tlv(data: str, *, nested: bool) -> Fields:
    fields: Fields = {}
    position = 0
    while position < len(data):
        header = data[position : position + 4]
        if len(header) < 4 or not _ascii_digits(header):
            raise InvalidBRCode(f"malformed TLV header at position {position}")
        field_id, length = header[:2], int(header[2:])
        value = data[position + 4 : position + 4 + length]
        if len(value) != length:
            raise InvalidBRCode(f"field {field_id} is shorter than its length {length}")
        if field_id in fields:
            raise InvalidBRCode(f"field {field_id} repeated")
        fields[field_id] = _parse_tlv(value, nested=True) if not nested and field_id in _TEMPLATE_IDS else value
        position += 4 + length
    return fields


@dataclass(frozen=True)
class BRCode:
    """What the checker read from a valid code."""

    fields: Fields
    amount: int | None  # centavos; None when the code leaves the amount to the payer
    location: str | None  # dynamic codes
    key: str | None  # static codes


def parse(code: str) -> BRCode:
    """Parse and validate structure, CRC and the PIX merchant account."""
    if not isinstance(code, str) or not code:
        raise InvalidBRCode("empty code")
    if len(code) > MAX_LENGTH:
        raise InvalidBRCode("longer than 512 characters")
    if not code.isprintable():
        raise InvalidBRCode("non-printable characters")
    if len(code) < 8 or code[-8:-4] != "6304":
        raise InvalidBRCode("does not end with the CRC field 6304")
    if crc16(code[:-4]) != code[-4:].upper():
        raise InvalidBRCode("CRC16 mismatch")
    fields = _parse_tlv(code, nested=False)
    if next(iter(fields)) != "00" or fields["00"] != "01":
        raise InvalidBRCode("payload format indicator 00 must come first and be 01")
    if list(fields)[-1] != "63":
        raise InvalidBRCode("CRC field 63 must be last")
    for required in ("52", "53", "58", "59", "60"):
        if required not in fields:
            raise InvalidBRCode(f"field {required} missing")
    if fields["53"] != "986" or fields["58"] != "BR":
        raise InvalidBRCode("currency must be 986 and country BR")

    # The PIX account is a template with the PIX GUI carrying a location (25,
    # dynamic) or a key (01, static): in 26-51 for charges, in 80-99 for the
    # recurrence part of Pix Automático codes.
    pix_templates = [
        value
        for field_id, value in fields.items()
        if field_id in _TEMPLATE_IDS
        and field_id != "62"
        and isinstance(value, dict)
        and str(value.get("00", "")).lower() == PIX_GUI
    ]
    if not pix_templates:
        raise InvalidBRCode("no merchant account with GUI br.gov.bcb.pix")
    account = next((t for t in pix_templates if t.get("25") or t.get("01")), pix_templates[0])
    location, key = account.get("25"), account.get("01")
    if not location and not key:
        raise InvalidBRCode("merchant account has neither a location (25) nor a key (01)")
    return BRCode(
        fields=fields,
        amount=_amount(fields.get("54")),
        location=str(location) if location else None,
        key=str(key) if key else None,
    )


def _ascii_digits(text: str) -> bool:
    # str.isdigit (and int()) also take full-width and Arabic-Indic digits.
    return text.isascii() and text.isdigit()


def _amount(raw: object) -> int | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw or raw.count(".") > 1 or not _ascii_digits(raw.replace(".", "")):
        raise InvalidBRCode("field 54 is not a decimal amount")
    try:
        value = Decimal(raw) * 100
    except InvalidOperation as exc:  # pragma: no cover - guarded above
        raise InvalidBRCode("field 54 is not a decimal amount") from exc
    if value != value.to_integral_value():
        raise InvalidBRCode("field 54 has more than two decimals")
    return int(value)


def check(code: str, *, amount: int) -> BRCode:
    """Accept ``code`` for a charge of ``amount`` centavos, or raise :class:`InvalidBRCode`."""
    parsed = parse(code)
    if parsed.amount != amount:
        raise InvalidBRCode(f"amount {parsed.amount} differs from the charge's {amount}")
    return parsed


def check_due(code: str, *, original: int) -> BRCode:
    """Accept ``code`` for a due-date charge (cobv) of ``original`` centavos,
    or raise :class:`InvalidBRCode`. It must be dynamic: the payer's app
    fetches the amount of the day it pays on from the location, so the code
    may carry no amount (the BR Code manual makes field 54 optional in a
    dynamic code, the payload's amount prevailing); one it does carry is
    ``valor.original``, never another."""
    parsed = parse(code)
    if parsed.location is None:
        raise InvalidBRCode("a due-date charge's code must be dynamic (a location, field 26.25)")
    if parsed.amount is not None and parsed.amount != original:
        raise InvalidBRCode(f"amount {parsed.amount} differs from the charge's original {original}")
    return parsed
