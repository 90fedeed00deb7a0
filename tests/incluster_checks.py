"""What every in-cluster end-to-end run must show in its report, wherever its pods ran: the scenario's nodes
Ready, the load submitted through Locust's worker pods with every job finished, and Prometheus (a pod) scraping
each agent shard and the target's apiserver with its least-privilege token.  Shared by the in-cluster tests."""

from __future__ import annotations

from typing import Any


def assert_nodes_load_and_scrapes(summary: dict[str, Any], nodes: int, shards: int) -> None:
    assert summary["cluster"]["nodes_ready"] == summary["cluster"]["nodes_expected"] == nodes
    locust = summary["load"]["locust"]
    assert locust["by_type"]["POST"]["requests"] > 20 and locust["by_type"]["POST"]["failures"] == 0
    jobs = summary["measurements"]["jobs"]
    assert jobs["submitted"] == locust["by_type"]["POST"]["requests"] and jobs["failed"] == 0 and \
        jobs["unfinished"] == 0, jobs
    # the apiserver's last scrape may time out on the shared cores (its /metrics with thousands of nodes can take
    # over the scrape interval), but it is never refused
    targets = summary["prometheus"]["targets"]
    agents = {job: h for job, h in targets.items() if job.startswith("hollow-agents")}
    assert len(agents) == shards and set(agents.values()) == {"up"}, targets
    assert "apiserver" in targets and "401" not in targets["apiserver"] and "403" not in targets["apiserver"], targets
