"""``make keys`` (``python -m dev.keys``): the demo's keys again, from what
``make run`` kept under var/, without starting anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def keys(var: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIX_VAR_DIR": str(var)}
    return subprocess.run(
        [sys.executable, "-m", "dev.keys"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_kept_keys_and_the_quickstarts_export_line(tmp_path: Path) -> None:
    (tmp_path / "demo-keys.json").write_text(json.dumps({"public_key": "pk_demo", "secret_key": "sk_demo"}))
    (tmp_path / "demo-admin.json").write_text(json.dumps({"username": "admin", "password": "s3cret"}))
    (tmp_path / "demo-sandbox.json").write_text(json.dumps({"notification_secret": "sbx-Secret_0123456789"}))
    done = keys(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "X-Public-Key: pk_demo" in done.stdout
    assert "X-Secret-Key: sk_demo" in done.stdout
    assert "user admin, password s3cret" in done.stdout
    assert "export PK=pk_demo SK=sk_demo SANDBOX_SECRET=sbx-Secret_0123456789" in done.stdout


def test_the_output_evaluates_in_a_shell_to_the_quickstarts_variables(tmp_path: Path) -> None:
    """``eval "$(make -s keys)"``: every line but the export is a comment."""
    (tmp_path / "demo-keys.json").write_text(json.dumps({"public_key": "pk_demo", "secret_key": "sk_demo"}))
    (tmp_path / "demo-sandbox.json").write_text(json.dumps({"notification_secret": "sbx-Secret_0123456789"}))
    done = keys(tmp_path)
    evaluated = subprocess.run(
        ["bash", "-euc", 'eval "$KEYS"; echo "$PK $SK $SANDBOX_SECRET"'],
        env={"KEYS": done.stdout, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert evaluated.stdout == "pk_demo sk_demo sbx-Secret_0123456789\n"
    assert evaluated.stderr == ""


def test_before_any_make_run_it_says_so(tmp_path: Path) -> None:
    done = keys(tmp_path)
    assert done.returncode == 1
    assert "make run" in done.stderr
    assert done.stdout == ""
