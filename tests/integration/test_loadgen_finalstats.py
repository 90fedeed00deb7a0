"""Locust's --csv files carry the final figures of a run, not the snapshot of its last second.

Each test runs in a fresh interpreter (:mod:`freshpython`): Locust monkey-patches the standard library on
import.  The code prints the rows it read back as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from freshpython import run_python

pytestmark = pytest.mark.integration  # each test runs in a fresh interpreter (a process)

READ_ROWS = """
import csv, json
def rows(path):
    with open(path, newline="") as fh:
        return {f"{r['Type']} {r['Name']}": r["Request Count"] + "/" + r["Failure Count"] for r in csv.DictReader(fh)}
"""


def _run(code: str) -> Any:
    r = run_python(READ_ROWS + code)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_final_csvs_win_over_locusts_stale_buffer(tmp_path: Path) -> None:
    out = _run(f"""
from pathlib import Path
from locust.env import Environment
from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter
from loadgen.finalstats import write_final_csvs

env = Environment()
env.create_local_runner()
prefix = {str(tmp_path / "locust")!r}
locust_writer = StatsCSVFileWriter(env, PERCENTILES_TO_REPORT, prefix)
env.stats.log_request("POST", "create Job a/worker", 12, 100)
# one pass of Locust's once-a-second CSV greenlet, left in its buffer as Locust leaves it
fh, w = locust_writer.requests_csv_filehandle, locust_writer.requests_csv_writer
fh.seek(0); w.writerow(locust_writer.requests_csv_columns); locust_writer._requests_data_rows(w); fh.truncate()
# the last second of the run: a create and a failed one that Locust's greenlet never writes
env.stats.log_request("POST", "create Job a/worker", 30, 100)
env.stats.log_request("POST", "create Pod b/server", 8, 90)
env.stats.log_error("POST", "create Pod b/server", "HTTP 422: invalid")
written = write_final_csvs(env, prefix)
locust_writer.close_files()  # Locust's shutdown: its stale buffer is flushed as it closes
with open(prefix + "_failures.csv", newline="") as f:
    failures = [(r["Name"], r["Occurrences"]) for r in csv.DictReader(f)]
print(json.dumps({{"written": [Path(p).name for p in written], "rows": rows(prefix + "_stats.csv"),
                  "failures": failures, "left": sorted(p.name for p in Path(prefix).parent.glob(".*"))}}))
""")
    assert out["written"] == ["locust_stats.csv", "locust_failures.csv", "locust_exceptions.csv"]
    assert out["rows"] == {"POST create Job a/worker": "2/0", "POST create Pod b/server": "1/1", " Aggregated": "3/1"}
    assert out["failures"] == [["create Pod b/server", "1"]]
    assert out["left"] == []  # no temporary file left behind


def test_locustfile_writes_them_on_quit(tmp_path: Path) -> None:
    prefix = str(tmp_path / "run")
    out = _run(f"""
from types import SimpleNamespace
from locust import events
from locust.env import Environment
import loadgen.locustfile as lf

assert lf._quit in events.quit._handlers
for csv_prefix in (None, {prefix!r}):
    env = Environment(parsed_options=SimpleNamespace(csv_prefix=csv_prefix))
    env.create_local_runner()
    env.stats.log_request("POST", "create Job a/worker", 12, 100)
    lf.STATE.environment = env
    events.quit.fire(exit_code=0)
print(json.dumps(rows({prefix!r} + "_stats.csv")))
""")
    assert out == {"POST create Job a/worker": "1/0", " Aggregated": "1/0"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_exceptions.csv", "run_failures.csv", "run_stats.csv"]
