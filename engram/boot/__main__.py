"""`python -m engram.boot serve --home H`: the server process (`engram.boot.serve`)."""

import sys

from engram.boot.serve import main, set_up_process

set_up_process()  # umask 077 and engram's logging, before anything else runs in the process
sys.exit(main())
