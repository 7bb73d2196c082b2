"""``python -m fim``: the ``seam`` command line."""

import sys

from fim.cli import main

sys.exit(main())
