"""``python -m distill`` = the ``hollowscale distill`` commands."""

from distill.cli import main

main()
