"""`python -m engram` runs the CLI (the same as the `engram` command)."""

import sys

from engram.cli.main import main

sys.exit(main())
