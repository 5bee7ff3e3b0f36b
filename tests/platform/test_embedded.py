"""The embedded engines are shared: a second process joins, it does not start another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.redis import celery_broker_url
from dev import embedded

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL")), reason="real servers configured"
)

PROBE = """
from dev import embedded
print(embedded.redis_url())
print(embedded.postgres_settings()["HOST"])
print(sorted(embedded.started))
"""


def test_another_process_joins_the_running_engines() -> None:
    url = embedded.redis_url()
    host = embedded.postgres_settings()["HOST"]
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split("\n")[:3] == [url, host, "[]"]


def test_status_command_reports_both_running() -> None:
    embedded.redis_url()
    result = subprocess.run(
        [sys.executable, "-m", "dev.embedded", "status"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "postgres: running" in result.stdout
    assert "redis: running" in result.stdout


def test_celery_speaks_the_socket_url() -> None:
    assert celery_broker_url("unix:///x/redis.sock?db=0") == "redis+socket:///x/redis.sock?virtual_host=0"
    assert celery_broker_url("redis://h:6379/0") == "redis://h:6379/0"
