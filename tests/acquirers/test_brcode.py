"""BR Code encoder and checker, verified against an independent decoder
(starkbank-brcode) and the examples of Banco Central's API Pix."""

from __future__ import annotations

import pytest
from brcode.utils.brcodeId import jsonFromBrcode

from acquirers import brcode
from acquirers.brcode import InvalidBRCode

# pixCopiaECola examples published in bacen/pix-api (shared/reference).
BACEN_EXAMPLES = [
    "00020101021226760014br.gov.bcb.pix2554pix.example.com/qr/v2/8b3da2f39a4140d1a91abd93113bd441"
    "5204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558"
    "pix.example.com/qr/v2/rec/94ed2badcbc04c15b0bb7fa35319489063047741",
    "00020101021226810014br.gov.bcb.pix2559pix.example.com/qr/v2/cobv/1e6c54d3ec9449b7a7fc53b6b0f998e7"
    "5204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***80800014br.gov.bcb.pix2558"
    "pix.example.com/qr/v2/rec/3ffa640fa4f14080adccb949fa2dc0d06304A441",
    "00020126180014br.gov.bcb.pix5204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***"
    "80800014br.gov.bcb.pix2558pix.example.com/qr/v2/rec/2353c790eefb11eaadc10242ac120002630462C9",
]


def sample(amount: int = 12345, **overrides: str) -> str:
    args = {
        "location": "pix.sandbox.local/qr/v2/abc123",
        "merchant_name": "Loja São João Ação Ltda Muito Longa",
        "merchant_city": "São Paulo da Serra Alta",
        **overrides,
    }
    return brcode.encode_dynamic(amount=amount, **args)


@pytest.mark.parametrize("amount", [100, 101, 12345, 300000, 99])
def test_encoded_code_decodes_with_an_independent_decoder(amount: int) -> None:
    code = sample(amount)
    decoded = jsonFromBrcode(code)  # raises on CRC or length mismatch
    assert decoded["00"] == "01"
    assert decoded["01"] == "12"
    assert decoded["26"] == {"00": "br.gov.bcb.pix", "25": "pix.sandbox.local/qr/v2/abc123"}
    assert decoded["52"] == "0000"
    assert decoded["53"] == "986"
    assert decoded["54"] == f"{amount / 100:.2f}"
    assert decoded["58"] == "BR"
    assert decoded["62"] == {"05": "***"}
    assert len(decoded["59"]) <= 25
    assert decoded["59"].isascii()
    assert len(decoded["60"]) <= 15
    assert decoded["60"].isascii()
    assert len(code) <= 512


def test_names_are_ascii_upper_and_cut() -> None:
    decoded = jsonFromBrcode(sample())
    assert decoded["59"] == "LOJA SAO JOAO ACAO LTDA M"
    assert decoded["60"] == "SAO PAULO DA SE"


def test_crc_matches_the_reference_value() -> None:
    # CRC-16/CCITT-FALSE check value of "123456789" is 0x29B1.
    assert brcode.crc16("123456789") == "29B1"


def _crc16_bitwise(data: str) -> str:
    # The textbook definition, bit by bit: what crc16 (binascii, in C) must equal.
    crc = 0xFFFF
    for byte in data.encode("utf-8"):
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return f"{crc:04X}"


@pytest.mark.parametrize("data", ["", "0", "000201", "São João ÇÃO 🙂", "6304" * 128, *BACEN_EXAMPLES])
def test_crc_matches_the_bitwise_definition(data: str) -> None:
    assert brcode.crc16(data) == _crc16_bitwise(data)


@pytest.mark.parametrize("code", BACEN_EXAMPLES)
def test_bacen_examples_pass_the_checker(code: str) -> None:
    parsed = brcode.parse(code)
    assert parsed.amount is None
    assert parsed.location is not None or parsed.key is not None
    assert jsonFromBrcode(code)  # and the independent decoder agrees


def test_checker_accepts_our_code_for_its_amount() -> None:
    parsed = brcode.check(sample(5000), amount=5000)
    assert parsed.amount == 5000
    assert parsed.location == "pix.sandbox.local/qr/v2/abc123"


def _recrc(body: str) -> str:
    payload = body + "6304"
    return payload + brcode.crc16(payload)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("", "empty"),
        (sample()[:-1] + ("0" if sample()[-1] != "0" else "1"), "CRC16"),
        (sample()[:-8], "6304"),
        ("x" * 513, "512"),
        (_recrc("000201" + "26180014br.gov.bcb.pi"), "shorter"),
        (_recrc("000202" + "5204000053039865802BR5901A6001B"), "payload format"),
        (_recrc("0002015204000053039865802BR5901A6001B"), "GUI"),
        (_recrc("00020126180014br.gov.bcb.pix5204000053039865802BR5901A6001B"), "neither"),
        (_recrc("00020126300014br.gov.bcb.pix2508loc/x/yz5204000053038405802BR5901A6001B"), "currency"),
        (_recrc("00020126300014br.gov.bcb.pix2508loc/x/yz52040000530398654041.2x5802BR5901A6001B"), "decimal"),
        (_recrc("00020126300014br.gov.bcb.pix2508loc/x/yz520400005303986540610.0015802BR5901A6001B"), "decimal"),
        ("ab\x00" + sample()[3:], "non-printable"),
        # int() and str.isdigit() take these; a payer's bank does not.
        (_recrc("00020126300014br.gov.bcb.pix2508loc/x/yz52040000530398654\u0660\u06645.005802BR5901A6001B"), "TLV"),
        (_recrc("00020126300014br.gov.bcb.pix2508loc/x/yz52040000530398654045.\uff1105802BR5901A6001B"), "decimal"),
    ],
)
def test_checker_refuses_malformed_codes(code: str, reason: str) -> None:
    with pytest.raises(InvalidBRCode, match=reason):
        brcode.parse(code)


def test_checker_refuses_a_different_amount() -> None:
    with pytest.raises(InvalidBRCode, match="differs"):
        brcode.check(sample(5000), amount=5001)


def test_checker_refuses_a_code_without_amount_for_a_charge() -> None:
    with pytest.raises(InvalidBRCode, match="differs"):
        brcode.check(BACEN_EXAMPLES[0], amount=100)


def test_a_due_charge_code_may_leave_the_amount_to_its_location_as_bacens_cobv_example_does() -> None:
    parsed = brcode.check_due(BACEN_EXAMPLES[1], original=15000)
    assert (parsed.amount, parsed.location) == (None, "pix.example.com/qr/v2/cobv/1e6c54d3ec9449b7a7fc53b6b0f998e7")
    ours = brcode.encode_dynamic(
        location="pix.sandbox.local/qr/v2/cobv/x", amount=None, merchant_name="A", merchant_city="B"
    )
    assert "54" not in jsonFromBrcode(ours)
    assert brcode.check_due(ours, original=15000).amount is None


def test_a_due_charge_code_carrying_an_amount_carries_the_original() -> None:
    assert brcode.check_due(sample(15000), original=15000).amount == 15000
    with pytest.raises(InvalidBRCode, match="differs"):
        brcode.check_due(sample(15332), original=15000)


def test_a_due_charge_code_must_be_dynamic() -> None:
    static = "00020126330014br.gov.bcb.pix0111529982247255204000053039865802BR5904NOME6006CIDADE62070503***6304"
    static += brcode.crc16(static)
    assert brcode.parse(static).key == "52998224725"
    with pytest.raises(InvalidBRCode, match="dynamic"):
        brcode.check_due(static, original=15000)


def test_encoder_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="scheme"):
        sample(location="https://x/y")
    with pytest.raises(ValueError, match="positive"):
        sample(0)
