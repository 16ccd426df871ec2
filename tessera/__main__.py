"""``python -m tessera`` runs the command line."""

import sys

from tessera.cli import main

sys.exit(main())
