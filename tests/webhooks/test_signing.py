"""Standard Webhooks signatures (decisions §6): ours must be what any
Standard Webhooks library computes and accepts. Checked against the
specification's published test vector and the independent
``standardwebhooks`` package."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import string
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from core.tokens import new_webhook_secret
from webhooks.signing import sign, signature_header

# The test vector published with the Standard Webhooks specification and used
# by its reference libraries (also Svix's ``testSignFunctionWorks``); the
# installed package ships no tests of its own.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def headers(msg_id: str, timestamp: int, signature: str) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def test_sign_reproduces_the_published_test_vector() -> None:
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    # The library agrees on the vector, so the comparison below means something.
    library = Webhook(VECTOR_SECRET).sign(
        VECTOR_ID, dt.datetime.fromtimestamp(VECTOR_TIMESTAMP, dt.UTC), VECTOR_BODY.decode()
    )
    assert library == VECTOR_SIGNATURE
    # The whsec_ prefix is optional, as in the reference implementation.
    assert sign(VECTOR_SECRET.removeprefix("whsec_"), VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE


def random_body(rng: random.Random) -> bytes:
    text = "".join(rng.choice(string.printable + "çãéü€中🙂") for _ in range(rng.randint(0, 300)))
    record = {"id": rng.getrandbits(64), "text": text, "amount": rng.randint(0, 300000), "ok": rng.random() < 0.5}
    return json.dumps(record, ensure_ascii=rng.random() < 0.5).encode()


def test_sign_agrees_with_the_standardwebhooks_library_for_random_inputs() -> None:
    rng = random.Random(20240601)
    for _ in range(200):
        key = rng.randbytes(rng.choice([16, 24, 32, 48, 64]))
        secret = "whsec_" + base64.b64encode(key).decode()
        msg_id = "".join(rng.choice(string.ascii_letters + string.digits + "-_") for _ in range(rng.randint(1, 40)))
        timestamp = rng.randint(0, 4_000_000_000)
        body = random_body(rng)

        expected = Webhook(secret).sign(msg_id, dt.datetime.fromtimestamp(timestamp, dt.UTC), body.decode())
        assert sign(secret, msg_id, timestamp, body) == expected


def test_a_signature_verifies_with_the_library_and_tampering_is_detected() -> None:
    secret = new_webhook_secret()
    msg_id = "2f7e1bb4-5f53-4cf3-a62c-1ec1d1b2f4a1"
    timestamp = int(time.time())
    body = json.dumps({"id": msg_id, "event_type": "transaction", "data": {"amount": 1000}}).encode()
    signature = signature_header([secret], msg_id, timestamp, body)

    assert Webhook(secret).verify(body, headers(msg_id, timestamp, signature)) == json.loads(body)
    tampered = body.replace(b"1000", b"9000")
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(tampered, headers(msg_id, timestamp, signature))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, headers(msg_id + "x", timestamp, signature))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, headers(msg_id, timestamp + 1, signature))
    with pytest.raises(WebhookVerificationError):
        Webhook(new_webhook_secret()).verify(body, headers(msg_id, timestamp, signature))


def test_signature_header_signs_with_each_secret_space_separated() -> None:
    old, new = new_webhook_secret(), new_webhook_secret()
    msg_id = "msg_rotation"
    timestamp = int(time.time())
    body = b'{"rotation": true}'

    value = signature_header([new, old], msg_id, timestamp, body)

    assert value == f"{sign(new, msg_id, timestamp, body)} {sign(old, msg_id, timestamp, body)}"
    assert Webhook(new).verify(body, headers(msg_id, timestamp, value)) == {"rotation": True}
    assert Webhook(old).verify(body, headers(msg_id, timestamp, value)) == {"rotation": True}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_webhook_secret()).verify(body, headers(msg_id, timestamp, value))
    # An empty (absent) previous secret adds no signature.
    assert signature_header([new, ""], msg_id, timestamp, body) == sign(new, msg_id, timestamp, body)
