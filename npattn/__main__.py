"""``python -m npattn`` runs the command line (same as the ``npattn`` script)."""

import sys

from npattn.cli.main import entry

sys.exit(entry())
