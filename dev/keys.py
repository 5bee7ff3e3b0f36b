"""``make keys``: print the demo account's keys (and the admin's login) that
``make run`` printed, once its banner has scrolled away under the request
logs. Reads ``var/demo-keys.json`` and ``var/demo-admin.json``, which
``make run`` keeps (the database holds only the secret's hash); starts
nothing. The ``export`` lines feed the README's quickstart."""

from __future__ import annotations

import json
import sys

from dev.embedded import var_dir


def main() -> int:
    var = var_dir()
    keys_file = var / "demo-keys.json"
    if not keys_file.exists():
        print("No demo keys yet: `make run` creates them (and prints them).", file=sys.stderr)
        return 1
    keys = json.loads(keys_file.read_text())
    print("Demo account keys (permission: all):")
    print(f"  X-Public-Key: {keys['public_key']}")
    print(f"  X-Secret-Key: {keys['secret_key']}")
    admin_file = var / "demo-admin.json"
    if admin_file.exists():
        admin = json.loads(admin_file.read_text())
        print(f"Admin: user {admin['username']}, password {admin['password']}")
    print("\nFor the README's quickstart, in your shell:")
    print(f"  export PK={keys['public_key']} SK={keys['secret_key']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
