"""`python -m jobs.acceptance`."""

import sys

from jobs.acceptance import main

sys.exit(main())
