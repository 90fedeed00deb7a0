"""``python -m hollow run --kubeconfig K --pools FILE ...`` (``run`` may be left out)."""

from __future__ import annotations

import sys

from hollow.cli import nodes_group


def main(argv: list[str] | None = None) -> None:
    """Entry point: the ``nodes`` group, with ``run`` implied when the first argument is an option."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0] not in nodes_group.commands and args[0] not in ("--help", "-h")):
        args.insert(0, "run")
    nodes_group.main(args=args, prog_name="python -m hollow")


if __name__ == "__main__":
    main()
