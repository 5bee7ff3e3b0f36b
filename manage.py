#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    # Fail closed: a deployment that forgets DJANGO_SETTINGS_MODULE gets the
    # production settings, which refuse to start half-configured, never DEBUG
    # and the sandbox. `make run`, the tests and compose name theirs.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
