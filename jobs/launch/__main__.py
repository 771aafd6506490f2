"""`python -m jobs.launch`."""

import sys

from jobs.launch import main

sys.exit(main())
