"""``python -m hollowscale.draplugin``: see :mod:`hollowscale.draplugin.cli`."""

import sys

from hollowscale.draplugin.cli import main

sys.exit(main())
