"""``python -m hollowscale.deviceplugin``: see :mod:`hollowscale.deviceplugin.cli`."""

import sys

from hollowscale.deviceplugin.cli import main

sys.exit(main())
