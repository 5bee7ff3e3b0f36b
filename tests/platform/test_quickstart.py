"""The README's Quickstart, run as written against ``make run`` on a port
other than 8000 (issue 30): the first ``sh`` block under ``## Quickstart``
is extracted and run with bash once ``make run`` has printed its banner;
then ``make stop`` must stop everything ``make run`` started.

``make run`` gets a database of its own on the test's server, queues of its
own on its broker and a var/ directory of its own (keys, secrets, pid file),
so it never touches a developer's demo. Alone: ``pytest -m quickstart``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from django.conf import settings
from django.db import connection
from psycopg import sql

from tests.realworld import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
VENV = sys.prefix
#: make run's banner, printed once web and every worker answer (dev/run.py).
BANNER = "PIX Service is up"

pytestmark = [pytest.mark.quickstart, pytest.mark.timeout(420)]


def quickstart_block(readme: str) -> str:
    """The first ```sh block of the section headed exactly ``## Quickstart``."""
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"^```sh\n(.*?)^```", section, re.S | re.M)
    assert match, "no ```sh block under ## Quickstart"
    return match.group(1)


def test_the_block_is_found_and_uses_the_port_and_make_keys() -> None:
    block = quickstart_block((ROOT / "README.md").read_text())
    assert "${PORT:-8000}" in block
    assert "127.0.0.1:8000" not in block
    assert 'eval "$(make -s keys)"' in block


def _database_url(name: str) -> str:
    db = connection.settings_dict
    user = urllib.parse.quote(db.get("USER") or "postgres")
    password = f":{urllib.parse.quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    host = urllib.parse.quote(db.get("HOST") or "127.0.0.1", safe="")  # a socket directory, escaped
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{name}"


def _admin_connection() -> Any:
    db = connection.settings_dict
    return psycopg.connect(
        host=db.get("HOST") or "127.0.0.1",
        port=db.get("PORT") or None,
        user=db.get("USER") or "postgres",
        password=db.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )


@pytest.fixture
def own_database(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    name = f"{connection.settings_dict['NAME']}_quickstart"[:63]
    with django_db_blocker.unblock(), _admin_connection() as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield name
    with django_db_blocker.unblock(), _admin_connection() as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _env(var: Path, port: int, database: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        # make run names its own settings and log level; the tests' must not leak in.
        if key not in {"DJANGO_SETTINGS_MODULE", "PIX_DATABASE_NAME", "LOG_LEVEL", "PYTEST_CURRENT_TEST"}
    }
    queues = f"qs-{uuid.uuid4().hex[:8]}"
    return {
        **env,
        "PORT": str(port),
        "VENV": VENV,
        "PIX_VAR_DIR": str(var),
        "DATABASE_URL": _database_url(database),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_TASK_DEFAULT_QUEUE": f"{queues}-default",
        "WEBHOOK_QUEUE": f"{queues}-webhooks",
        "PAYOUT_QUEUE": f"{queues}-payouts",
        # Small: the machine runs the rest of the suite too.
        "WEB_WORKERS": "1",
        "WEB_THREADS": "8",
        "WORKER_CONCURRENCY": "1",
        "WEBHOOK_WORKER_CONCURRENCY": "2",
        "PAYOUT_WORKER_CONCURRENCY": "1",
    }


def _make(*args: str) -> list[str]:
    # The venv this test runs in, as made (make run would otherwise install one in a worktree).
    return ["make", "-o", f"{VENV}/.installed", f"VENV={VENV}", *args]


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Its whole process group: the block's receiver outlives the bash that started it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _answers(port: int) -> bool:
    try:
        requests.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
    except requests.RequestException:
        return False
    return True


def test_the_readme_quickstart_runs_against_make_run_on_another_port(tmp_path: Path, own_database: str) -> None:
    port = free_port()
    var = tmp_path / "var"
    env = _env(var, port, own_database)
    run_log = tmp_path / "make-run.log"
    with open(run_log, "wb") as out:
        run = subprocess.Popen(
            _make("run"), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    receiver: subprocess.Popen[bytes] | None = None
    try:

        def banner() -> bool:
            assert run.poll() is None, run_log.read_text(errors="replace")
            return BANNER in run_log.read_text(errors="replace")

        wait_for(banner, timeout=240, interval=0.5)
        started = run_log.read_text(errors="replace")
        # Printed once everything answers: web is ready by then.
        assert requests.get(f"http://127.0.0.1:{port}/api/health/ready", timeout=5).status_code == 200
        assert f"http://127.0.0.1:{port}/api/" in started
        assert "DeprecationWarning" not in started  # Celery's, from our own settings (config/celery.py)
        assert "SANDBOX_SECRET=" in started
        assert " INFO/" not in started  # processes log at WARNING unless LOG_LEVEL says otherwise

        out_file = tmp_path / "quickstart.out"
        block = quickstart_block((ROOT / "README.md").read_text())
        preamble = 'make() { command make -s -o "$VENV/.installed" VENV="$VENV" "$@"; }\nset -e\n'
        with open(out_file, "wb") as out:
            receiver = subprocess.Popen(
                ["bash", "-c", preamble + block],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            # The block ends while its receiver (a background job) keeps running.
            receiver.wait(timeout=120)

        def output() -> str:
            return out_file.read_text(errors="replace")

        assert receiver.returncode == 0, output()
        text = output()
        assert '"message":"Webhook cadastrado com sucesso."' in text, text
        assert re.search(r'"pix":\{"emv":"000201', text), text
        assert '"message":"Transação atualizada."' in text, text
        balance = re.search(r'"available_balance":(\d+)', text)
        assert balance, text
        assert int(balance.group(1)) > 0, text
        assert '"message":"Saque solicitado com sucesso."' in text, text
        assert '{"success":true,"message":"Notificação recebida.","data":{"processed":1}}' in text, text
        assert text.rstrip().endswith("}"), text
        notified = text.rstrip().splitlines()[-1]
        assert '"status":"paid"' in notified, text
        # The receiver printed the "paid" event of the charge.
        wait_for(lambda: re.search(r'webhook: .*"status":"paid"', output()), timeout=60, interval=0.5)

        keys = json.loads((var / "demo-keys.json").read_text())
        headers = {"X-Public-Key": keys["public_key"], "X-Secret-Key": keys["secret_key"]}

        def withdrawal_paid() -> bool:
            listed = requests.get(f"http://127.0.0.1:{port}/api/withdrawals", headers=headers, timeout=5).json()
            return [w["status"] for w in listed["data"]["withdrawals"]] == ["paid"]

        wait_for(withdrawal_paid, timeout=60, interval=0.5)

        # make stop, from another terminal: everything make run started stops.
        stopped = subprocess.run(_make("stop"), cwd=ROOT, env=env, capture_output=True, timeout=120, check=False)
        assert stopped.returncode == 0, stopped.stderr
        run.wait(timeout=30)
        assert not _answers(port)
        assert not (var / "run.pid").exists()
        leftovers = subprocess.run(["pgrep", "-s", str(run.pid)], capture_output=True, text=True, check=False)
        assert leftovers.stdout == "", leftovers.stdout
    finally:
        if receiver is not None:
            _stop_group(receiver)
        _stop_group(run)
