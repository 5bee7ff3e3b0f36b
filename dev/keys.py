"""``make keys``: print the demo account's keys (and the admin's login) that
``make run`` printed, once its banner has scrolled away under the request
logs. Reads ``var/demo-keys.json``, ``var/demo-admin.json`` and
``var/demo-sandbox.json``, which ``make run`` keeps (the database holds only
the secret's hash); starts nothing.

Everything but the ``export`` line is a shell comment, so the output can be
evaluated as it is: ``eval "$(make -s keys)"`` sets ``PK``, ``SK`` and
``SANDBOX_SECRET`` for the README's Quickstart."""

from __future__ import annotations

import json
import shlex
import sys

from dev.embedded import var_dir


def main() -> int:
    var = var_dir()
    keys_file = var / "demo-keys.json"
    if not keys_file.exists():
        print("No demo keys yet: `make run` creates them (and prints them).", file=sys.stderr)
        return 1
    keys = json.loads(keys_file.read_text())
    print("# Demo account keys (permission: all):")
    print(f"#   X-Public-Key: {keys['public_key']}")
    print(f"#   X-Secret-Key: {keys['secret_key']}")
    admin_file = var / "demo-admin.json"
    if admin_file.exists():
        admin = json.loads(admin_file.read_text())
        print(f"# Admin: user {admin['username']}, password {admin['password']}")
    exports = {"PK": keys["public_key"], "SK": keys["secret_key"]}
    sandbox_file = var / "demo-sandbox.json"
    if sandbox_file.exists():
        secret = json.loads(sandbox_file.read_text())["notification_secret"]
        print(f"# Sandbox acquirers' notification_secret (X-Sandbox-Signature): {secret}")
        exports["SANDBOX_SECRET"] = secret
    print('# For the README\'s Quickstart, in your shell (or: eval "$(make -s keys)"):')
    print("export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in exports.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
