"""`python -m engram.boot serve --home H`: the server process (`engram.boot.serve`)."""

import sys

from engram.boot.serve import main

sys.exit(main())
