import sys

from searchtome.cli import main

sys.exit(main())
