import sys

from fleetscope.cli import main

sys.exit(main())
