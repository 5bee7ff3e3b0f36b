"""Production settings, the compose file and structured logging."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pix_service.logging import request_id_var
from pix_service.settings.base import logging_config

ROOT = Path(__file__).resolve().parents[2]
PROD_ENV = {
    "DATABASE_URL": "postgres://pix:pix@127.0.0.1:1/pix",
    "REDIS_URL": "redis://127.0.0.1:1/0",
    "SECRET_KEY": "x" * 60 + "-a-long-random-production-secret",
    "ALLOWED_HOSTS": "pix.example.com",
}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV}
    base["DJANGO_SETTINGS_MODULE"] = "pix_service.settings.production"
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("missing", ["DATABASE_URL", "REDIS_URL", "SECRET_KEY"])
def test_production_refuses_to_start_without(missing: str) -> None:
    env = {k: v for k, v in PROD_ENV.items() if k != missing}
    result = _run(env, "check")
    assert result.returncode != 0
    assert missing in result.stderr
    assert "ImproperlyConfigured" in result.stderr


def test_production_passes_the_deploy_checks() -> None:
    result = _run(PROD_ENV, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stderr + result.stdout


def test_compose_file_is_valid_and_names_the_services() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("postgres", "redis", "web", "worker"):
        assert "test" in services[name]["healthcheck"], name
    for name in ("web", "worker", "beat", "migrate"):
        env = services[name]["environment"]
        assert env["DJANGO_SETTINGS_MODULE"] == "pix_service.settings.production"
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
    assert "celery" in " ".join(services["worker"]["command"])
    assert "beat" in services["beat"]["command"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_env_example_lists_every_variable_the_settings_read() -> None:
    import re

    names = set()
    for path in (ROOT / "pix_service" / "settings").glob("*.py"):
        names |= set(re.findall(r'env(?:\.\w+)?\("([A-Z_]+)"', path.read_text()))
        names |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', path.read_text()))
    example = (ROOT / ".env.example").read_text()
    assert names, "found no variables: the pattern is stale"
    assert sorted(n for n in names if n not in example) == []


def _log_line(fmt: str) -> str:
    stream = io.StringIO()
    config = logging_config(fmt, "INFO")
    config["handlers"]["console"]["stream"] = stream  # type: ignore[index]
    config["loggers"] = {"pix.test": {"handlers": ["console"], "level": "INFO", "propagate": False}}
    config["root"] = {"handlers": [], "level": "WARNING"}
    logging.config.dictConfig(config)
    token = request_id_var.set("abc123")
    try:
        logging.getLogger("pix.test").info("charge created")
    finally:
        request_id_var.reset(token)
    return stream.getvalue().strip()


@pytest.fixture
def restore_logging():
    from django.conf import settings

    yield
    logging.config.dictConfig(settings.LOGGING)


def test_json_logs_carry_the_request_id(restore_logging: None) -> None:
    record = json.loads(_log_line("json"))
    assert record["request_id"] == "abc123"
    assert record["message"] == "charge created"
    assert record["level"] == "INFO"


def test_text_logs_carry_the_request_id(restore_logging: None) -> None:
    assert "[abc123]" in _log_line("text")


def _production_client_says(script: str) -> object:
    """Run ``script`` (Django set up on the production settings, a test
    ``Client`` as ``Client``) and return the JSON its last line prints. No
    database is touched, so the fake DATABASE_URL never matters."""
    prelude = "import django, json; django.setup(); from django.test import Client; "
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV}
    env = {**base, **PROD_ENV, "DJANGO_SETTINGS_MODULE": "pix_service.settings.production"}
    result = subprocess.run(
        [sys.executable, "-c", prelude + script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_production_answers_carry_the_security_headers() -> None:
    """A real request through the production middleware stack, as the TLS proxy forwards it."""
    headers = _production_client_says(
        "h = {'Host': 'pix.example.com', 'X-Forwarded-Proto': 'https'}; "
        "r = Client(headers=h).get('/api/health'); "
        "print(json.dumps({'status': r.status_code, **dict(r.headers.items())}))"
    )
    assert isinstance(headers, dict)
    assert headers["status"] == 200
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert headers["Cache-Control"] == "no-store"
    assert "Server" not in headers


def test_production_redirects_plain_http_except_probes() -> None:
    statuses = _production_client_says(
        "c = Client(headers={'Host': 'pix.example.com'}); "
        "print(json.dumps([c.get(p).status_code for p in ('/api/transactions', '/api/health', '/metrics')]))"
    )
    # The API redirects to https; liveness and the (disabled) metrics answer on http.
    assert statuses == [301, 200, 404]
