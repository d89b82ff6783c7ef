"""``python -m clusterable`` (and ``torchrun -m clusterable``) runs the command line."""

import sys

from clusterable.cli import main

sys.exit(main())
