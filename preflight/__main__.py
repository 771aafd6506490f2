import sys

from preflight.cli import main

sys.exit(main())
