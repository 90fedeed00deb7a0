"""``python -m hollowscale.run SCENARIO ...``: the ``run`` command without the full CLI (tests, CI)."""

from hollowscale.run.cli import run_cmd

if __name__ == "__main__":
    run_cmd()
