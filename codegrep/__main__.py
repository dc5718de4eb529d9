import sys

from codegrep.cli import main

sys.exit(main())
