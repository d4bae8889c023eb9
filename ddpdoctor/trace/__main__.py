"""`python -m ddpdoctor.trace ...`: see ddpdoctor.trace.entry."""

import sys

from ddpdoctor.trace.entry import main

sys.exit(main())
