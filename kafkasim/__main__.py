"""``python -m kafkasim`` = the ``kafkasim`` command."""

import sys

from kafkasim.cli import main

sys.exit(main())
