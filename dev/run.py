"""``make run``: migrate, bootstrap the demo, print its keys, then run web,
the Celery workers (one for the default queue, one for webhook deliveries,
one for payouts: the Procfile's) and Celery beat in the foreground until Ctrl-C.

The demo's secret key is shown by ``pix_bootstrap`` only when created, so it
is kept in ``var/demo-keys.json`` (git-ignored, mode 0600) for later runs;
the sandbox acquirers' notification secret in ``var/demo-sandbox.json``.

The processes log at WARNING unless ``LOG_LEVEL`` says otherwise, and the
banner (keys, URLs) is printed once web answers its readiness probe and
every worker a ping, so it is the last thing on the screen. ``make stop``
in another terminal stops all of it as Ctrl-C does (``dev/stop.py``, through
the pid file this run writes).
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from dev import ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
# The demo's acquirers are sandbox ones. Set before the settings read .env
# (which never overrides the environment), so a .env copied from
# .env.example (PIX_SANDBOX=false) leaves the demo working; web, worker and
# beat inherit it. An explicit PIX_SANDBOX in the shell still wins.
os.environ.setdefault("PIX_SANDBOX", "true")
# Start-up and per-task INFO lines (about 240 in the first 10 s) buried the
# banner; warnings and errors still show. LOG_LEVEL=INFO brings them back.
os.environ.setdefault("LOG_LEVEL", "WARNING")

ROOT = Path(__file__).resolve().parent.parent
DEMO_FILE = ROOT / "demo" / "bootstrap.json"


def _demo_keys(bootstrap_output: dict[str, Any], keys_file: Path) -> dict[str, str]:
    from accounts.models import Account, ApiCredential
    from accounts.services import credential_issue

    created = bootstrap_output["accounts"]["demo"]["credentials"]["main"]
    if "secret_key" in created:
        keys = {"public_key": created["public_key"], "secret_key": created["secret_key"]}
    else:
        keys = json.loads(keys_file.read_text()) if keys_file.exists() else {}
        still_valid = ApiCredential.objects.filter(public_key=keys.get("public_key"), is_active=True).exists()
        if not still_valid:
            # var/ was wiped but the database kept the demo: issue a fresh pair.
            issued = credential_issue(account=Account.objects.get(ref="demo"), label="demo (make run)")
            keys = {"public_key": issued.credential.public_key, "secret_key": issued.secret_key}
    keys_file.write_text(json.dumps(keys))
    keys_file.chmod(0o600)
    return keys


def _notification_secret(secret_file: Path) -> str:
    """The demo sandbox acquirers' ``notification_secret``, made on the first
    run and kept under var/ like the demo's keys. Not a fixed value in
    demo/bootstrap.json: the notification URL takes no client credentials,
    so anyone who can reach the port and read the repository could sign a
    "paid" for the demo's charges."""
    if secret_file.exists():
        return str(json.loads(secret_file.read_text())["notification_secret"])
    secret = secrets.token_urlsafe(24)
    secret_file.write_text(json.dumps({"notification_secret": secret}))
    secret_file.chmod(0o600)
    return secret


def demo_file(secret: str) -> str:
    """demo/bootstrap.json with ``secret`` in every sandbox acquirer's options
    (the file sets options whole, so each run hands the secret in again)."""
    data = json.loads(DEMO_FILE.read_text())
    for acquirer in data.get("acquirers", []):
        if acquirer.get("adapter") == "sandbox":
            acquirer["options"] = {**acquirer.get("options", {}), "notification_secret": secret}
    return json.dumps(data)


def _demo_admin(keys_file: Path) -> dict[str, str] | None:
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    if user_model.objects.filter(is_superuser=True).exists():
        return None
    password = secrets.token_urlsafe(12)
    user_model.objects.create_superuser("admin", "admin@localhost", password)
    credentials = {"username": "admin", "password": password}
    keys_file.write_text(json.dumps(credentials))
    keys_file.chmod(0o600)
    return credentials


def prepare() -> dict[str, Any]:
    import django
    from django.core.management import call_command

    django.setup()
    from dev import embedded

    print("== migrating the database", flush=True)
    call_command("migrate", interactive=False, verbosity=0)
    print(f"== loading the demo account and its sandbox acquirers ({DEMO_FILE.relative_to(ROOT)})", flush=True)
    out = io.StringIO()
    var = embedded.var_dir()
    secret = _notification_secret(var / "demo-sandbox.json")
    call_command("pix_bootstrap", "-", stdin=io.StringIO(demo_file(secret)), stdout=out)
    admin_file = var / "demo-admin.json"
    admin = _demo_admin(admin_file) or (json.loads(admin_file.read_text()) if admin_file.exists() else None)
    keys = _demo_keys(json.loads(out.getvalue()), var / "demo-keys.json")
    return {"keys": keys, "admin": admin, "sandbox_secret": secret}


def banner(demo: dict[str, Any], port: str, metrics_token: str) -> str:
    from django.conf import settings

    keys, admin = demo["keys"], demo["admin"]
    base = f"http://127.0.0.1:{port}"
    lines = [
        "",
        "PIX Service is up (web + Celery worker + webhook worker + payout worker + Celery beat)."
        " Ctrl-C (or `make stop` elsewhere) stops everything.",
        f"  API:        {base}/api/",
        f"  Swagger UI: {base}/api/docs/",
        f"  Admin:      {base}/{settings.ADMIN_URL}"
        + (f"  (user {admin['username']}, password {admin['password']})" if admin else ""),
        second_factor_line(base),
        "",
        "Demo account keys (permission: all):",
        f"  X-Public-Key: {keys['public_key']}",
        f"  X-Secret-Key: {keys['secret_key']}",
        "",
        "Try it:",
        f"  curl -s {base}/api/withdrawals/balance \\",
        f"    -H 'X-Public-Key: {keys['public_key']}' \\",
        f"    -H 'X-Secret-Key: {keys['secret_key']}'",
        "",
        f"Sandbox acquirers' notification_secret: {demo['sandbox_secret']}",
        f"Metrics: curl -s {base}/metrics -H 'Authorization: Bearer {metrics_token}'",
        "",
        "The README's Quickstart (a charge, its payment, a withdrawal, a webhook) starts with:",
        f"  export PK={keys['public_key']} SK={keys['secret_key']} SANDBOX_SECRET={demo['sandbox_secret']}",
        '`make keys` prints these again (`eval "$(make -s keys)"` sets them).',
        "",
    ]
    return "\n".join(lines)


def second_factor_line(base: str) -> str:
    """What staff's second factor asks of the demo admin in this run."""
    from django.conf import settings

    enrol = f"{base}/{settings.ADMIN_URL}otp/enrol/"
    if settings.ADMIN_OTP_REQUIRED:
        return f"  Staff 2FA:  required (ADMIN_OTP_REQUIRED): the first sign-in enrols an authenticator app ({enrol})"
    return (
        "  Staff 2FA:  optional in local settings, required in production: password alone here;"
        f" try it by enrolling at {enrol}"
    )


def _metrics_env(var: Path, port: str) -> dict[str, str]:
    """One samples directory for web, worker and beat (emptied: counters start
    with the run), and a scrape token for this run unless one is configured."""
    directory = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or var / "metrics")
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    token = os.environ.get("METRICS_TOKEN") or secrets.token_urlsafe(24)
    return {"PROMETHEUS_MULTIPROC_DIR": str(directory), "METRICS_TOKEN": token}


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # Ctrl-C and `make stop` (SIGTERM) end the run the same way. SIGINT's
    # handler is set again: a shell starting `make run &` ignores it in the
    # job, and Python keeps an ignored SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    port = os.environ.get("PORT", "8000")
    # Claim links e-mailed by this run (printed on the console) open on this server.
    os.environ.setdefault("PUBLIC_BASE_URL", f"http://127.0.0.1:{port}")
    print("== starting PostgreSQL and Redis (embedded, under ./var/, unless DATABASE_URL/REDIS_URL)", flush=True)
    demo = prepare()

    from dev import embedded, stop

    var = embedded.var_dir()
    metrics = _metrics_env(var, port)
    # VENV_BIN: the Procfile's programs are this interpreter's (a venv other than ./.venv works too).
    env = {**os.environ, "WEB_PORT": port, "VENV_BIN": str(Path(sys.executable).parent), **metrics}
    print("== starting web, workers and beat (the banner follows once they all answer)", flush=True)
    # honcho runs the processes of the Procfile and stops all of them
    # when one dies or on Ctrl-C (the terminal's SIGINT reaches the group).
    honcho = subprocess.Popen([str(Path(sys.executable).parent / "honcho"), "start"], cwd=ROOT, env=env)  # noqa: S603
    stop.write_pid_file(var, honcho.pid)
    code: int | None = None
    try:
        try:
            answered = ready.wait_until_answering(port, honcho)
            if answered:
                print(banner(demo, port, metrics["METRICS_TOKEN"]), flush=True)
            elif honcho.poll() is None:
                print(f"!! not every process answered within {ready.TIMEOUT:.0f} s; the banner anyway:", flush=True)
                print(banner(demo, port, metrics["METRICS_TOKEN"]), flush=True)
        except KeyboardInterrupt:
            honcho.send_signal(signal.SIGINT)
        while code is None:
            try:
                code = honcho.wait()
            except KeyboardInterrupt:
                honcho.send_signal(signal.SIGINT)
    finally:
        if embedded.started:
            # Only what this run started; engines someone else started stay up.
            embedded.stop()
        stop.remove_pid_file(var)
    return 0 if code in (0, -signal.SIGINT, 130) else code


if __name__ == "__main__":
    sys.exit(main())
