"""``python -m audit`` runs the dpaudit command line."""

import sys

from .cli import main

sys.exit(main())
