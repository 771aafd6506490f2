"""`python -m jobs.rehearsal`."""

import sys

from jobs.rehearsal import main

sys.exit(main())
