#!/usr/bin/env python
"""Django's command-line utility for OneValet."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")
    from onevalet_site.env import ConfigError

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except ConfigError as exc:
        # One line naming the variable, not a traceback.
        sys.stderr.write(f"OneValet configuration error — {exc}\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
