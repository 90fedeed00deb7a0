"""Locust's --csv files carry the final figures of a run, not the snapshot of its last second."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace

import pytest
from locust.env import Environment
from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter

from loadgen.finalstats import write_final_csvs


def _rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with path.open(newline="") as fh:
        return {(r["Type"], r["Name"]): r for r in csv.DictReader(fh)}


def _locust_writer_tick(writer: StatsCSVFileWriter) -> None:
    """One pass of Locust's once-a-second CSV greenlet, left in its buffer as Locust leaves it."""
    writer.requests_csv_filehandle.seek(0)
    writer.requests_csv_writer.writerow(writer.requests_csv_columns)
    writer._requests_data_rows(writer.requests_csv_writer)
    writer.requests_csv_filehandle.truncate()


def test_final_csvs_win_over_locusts_stale_buffer(tmp_path: Path) -> None:
    env = Environment()
    env.create_local_runner()
    prefix = str(tmp_path / "locust")
    locust_writer = StatsCSVFileWriter(env, PERCENTILES_TO_REPORT, prefix)
    env.stats.log_request("POST", "create Job a/worker", 12, 100)
    _locust_writer_tick(locust_writer)
    # the last second of the run: a create and a failure that Locust's greenlet never writes
    env.stats.log_request("POST", "create Job a/worker", 30, 100)
    env.stats.log_request("POST", "create Pod b/server", 8, 90)
    env.stats.log_error("POST", "create Pod b/server", "HTTP 422: invalid")
    env.stats.log_request("POST", "create Pod b/server", 9, 0)

    written = write_final_csvs(env, prefix)
    locust_writer.close_files()  # Locust's shutdown: its stale buffer is flushed as it closes

    assert [p.name for p in written] == ["locust_stats.csv", "locust_failures.csv", "locust_exceptions.csv"]
    rows = _rows(tmp_path / "locust_stats.csv")
    assert rows[("POST", "create Job a/worker")]["Request Count"] == "2"
    assert rows[("POST", "create Pod b/server")]["Request Count"] == "2"
    assert rows[("POST", "create Pod b/server")]["Failure Count"] == "1"
    assert rows[("", "Aggregated")]["Request Count"] == "4"
    with (tmp_path / "locust_failures.csv").open(newline="") as fh:
        failures = list(csv.DictReader(fh))
    assert [(f["Name"], f["Occurrences"]) for f in failures] == [("create Pod b/server", "1")]
    assert not list(tmp_path.glob(".*.final"))  # no temporary file left


def _quit_locust(env: Environment, monkeypatch: pytest.MonkeyPatch) -> None:
    """Locust's ``quit`` event as the locustfile sees it, with ``env`` as the run's environment."""
    from locust import events

    import loadgen.locustfile as lf

    assert lf._quit in events.quit._handlers
    env.create_local_runner()
    monkeypatch.setattr(lf.STATE, "environment", env)
    lf._quit(exit_code=0)


def test_locustfile_writes_them_on_quit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = Environment(parsed_options=SimpleNamespace(csv_prefix=str(tmp_path / "run")))
    env.stats.log_request("POST", "create Job a/worker", 12, 100)
    _quit_locust(env, monkeypatch)
    assert _rows(tmp_path / "run_stats.csv")[("POST", "create Job a/worker")]["Request Count"] == "1"


def test_no_csv_prefix_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _quit_locust(Environment(parsed_options=SimpleNamespace(csv_prefix=None)), monkeypatch)
    assert not list(tmp_path.iterdir())
