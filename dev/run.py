"""``make run``: migrate, bootstrap the demo, print its keys, then run web,
the Celery workers (one for the default queue, one for webhook deliveries,
one for payouts: the Procfile's) and Celery beat in the foreground until Ctrl-C.

The demo's secret key is shown by ``pix_bootstrap`` only when created, so it
is kept in ``var/demo-keys.json`` (git-ignored, mode 0600) for later runs.
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

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
# The demo's acquirers are sandbox ones. Set before the settings read .env
# (which never overrides the environment), so a .env copied from
# .env.example (PIX_SANDBOX=false) leaves the demo working; web, worker and
# beat inherit it. An explicit PIX_SANDBOX in the shell still wins.
os.environ.setdefault("PIX_SANDBOX", "true")

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
    call_command("pix_bootstrap", str(DEMO_FILE), stdout=out)
    var = embedded.var_dir()
    admin_file = var / "demo-admin.json"
    admin = _demo_admin(admin_file) or (json.loads(admin_file.read_text()) if admin_file.exists() else None)
    return {"keys": _demo_keys(json.loads(out.getvalue()), var / "demo-keys.json"), "admin": admin}


def banner(keys: dict[str, str], admin: dict[str, str] | None, port: str) -> str:
    from django.conf import settings

    base = f"http://127.0.0.1:{port}"
    lines = [
        "",
        "PIX Service is starting (web + Celery worker + webhook worker + payout worker + Celery beat)."
        " Ctrl-C stops everything.",
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
        "The README's quickstart (a charge, its payment, a withdrawal, a webhook) starts with:",
        f"  export PK={keys['public_key']} SK={keys['secret_key']}",
        "`make keys` prints these again.",
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
    print(f"Metrics: curl -s http://127.0.0.1:{port}/metrics -H 'Authorization: Bearer {token}'\n", flush=True)
    return {"PROMETHEUS_MULTIPROC_DIR": str(directory), "METRICS_TOKEN": token}


def main() -> int:
    port = os.environ.get("PORT", "8000")
    # Claim links e-mailed by this run (printed on the console) open on this server.
    os.environ.setdefault("PUBLIC_BASE_URL", f"http://127.0.0.1:{port}")
    print("== starting PostgreSQL and Redis (embedded, under ./var/, unless DATABASE_URL/REDIS_URL)", flush=True)
    demo = prepare()
    print(banner(demo["keys"], demo["admin"], port), flush=True)

    from dev import embedded

    env = {**os.environ, "WEB_PORT": port, **_metrics_env(embedded.var_dir(), port)}
    # honcho runs the processes of the Procfile and stops all of them
    # when one dies or on Ctrl-C (the terminal's SIGINT reaches the group).
    honcho = subprocess.Popen([str(Path(sys.executable).parent / "honcho"), "start"], cwd=ROOT, env=env)  # noqa: S603
    try:
        while True:
            try:
                code = honcho.wait()
                break
            except KeyboardInterrupt:
                honcho.send_signal(signal.SIGINT)
    finally:
        if embedded.started:
            # Only what this run started; engines someone else started stay up.
            embedded.stop()
    return 0 if code in (0, -signal.SIGINT, 130) else code


if __name__ == "__main__":
    sys.exit(main())
