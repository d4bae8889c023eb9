"""`python -m ddpdoctor.worker [RUN_DIR]`: the documented entry point that torchrun (or the user's
own launcher) starts on every rank. The code lives on the rank side, in `ddpdoctor.rank.worker`."""

from __future__ import annotations

import sys

from ddpdoctor.rank.worker import main

if __name__ == "__main__":
    sys.exit(main())
