"""``python -m hollowscale.run_cli_main SCENARIO ...``: the ``run`` command without the full CLI (tests, CI)."""

from hollowscale.run_cli import run_cmd

if __name__ == "__main__":
    run_cmd()
