"""Command line: ``hollowscale nodes run ...`` and ``python -m hollow run ...``.

Every option is also an environment variable (``HOLLOW_<OPTION>``, e.g. ``HOLLOW_SHARD=1/4``), so the
same agent runs from a shell, a scenario runner or a pod spec without code changes.
"""

from __future__ import annotations

import logging
import os
import sys

import click

from hollow.sharding import parse_shard


def _shard(_: click.Context, __: click.Parameter, value: str) -> object:
    try:
        return parse_shard(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(name="nodes", help="Hollow GPU nodes: register fake nodes and run their pods' lifecycles.")
def nodes_group() -> None:
    """The ``nodes`` command group."""


@nodes_group.command("run")
@click.option("--kubeconfig", envvar="HOLLOW_KUBECONFIG", default=lambda: os.environ.get("KUBECONFIG"),
              required=True, type=click.Path(dir_okay=False), help="Admin kubeconfig of the cluster.")
@click.option("--pools", "pools_file", envvar="HOLLOW_POOLS", required=True, type=click.Path(dir_okay=False),
              help="Pools YAML, snake_case keys (see hollow/pools.py); stages files relative to it.")
@click.option("--shard", envvar="HOLLOW_SHARD", default="0/1", show_default=True, callback=_shard,
              help="This process's part i/n of the pools' nodes.")
@click.option("--metrics-port", envvar="HOLLOW_METRICS_PORT", default=0, show_default=True, type=int,
              help="Port for /metrics, /healthz and /faults/* (0 = pick a free one; printed).")
@click.option("--metrics-host", envvar="HOLLOW_METRICS_HOST", default="127.0.0.1", show_default=True)
@click.option("--delete-nodes-on-exit", envvar="HOLLOW_DELETE_NODES_ON_EXIT", is_flag=True,
              help="Delete this agent's Nodes and Leases on SIGTERM/SIGINT.")
@click.option("--heartbeat-factor", envvar="HOLLOW_HEARTBEAT_FACTOR", default=1.0, show_default=True,
              type=click.FloatRange(min=0.05, max=100.0),
              help="Multiplies lease duration (40 s), renew interval (lease/4) and status refresh (300 s).")
@click.option("--max-inflight", envvar="HOLLOW_MAX_INFLIGHT", default=128, show_default=True,
              type=click.IntRange(min=1, max=10000), help="Global bound on concurrent API requests.")
@click.option("--gang-barrier/--no-gang-barrier", envvar="HOLLOW_GANG_BARRIER", default=True, show_default=True,
              help="Gang members (label hollowscale.io/gang, annotation hollowscale.io/gang-min: N) start their "
                   "run duration once N members run, not at their own start; a pool's lifecycle.gang_barrier "
                   "overrides it.")
@click.option("--log-level", envvar="HOLLOW_LOG_LEVEL", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def run(kubeconfig: str, pools_file: str, shard: object, metrics_port: int, metrics_host: str,
        delete_nodes_on_exit: bool, heartbeat_factor: float, max_inflight: int, gang_barrier: bool,
        log_level: str) -> None:
    """Run a hollow-node agent in the foreground until SIGTERM/SIGINT."""
    # imported here: `hollowscale --help` mounts this group and must not pay for aiohttp and pydantic
    from hollow.agent import run_agent
    from hollow.api import ApiSettings
    from hollow.pools import PoolsError, load_pools
    from hollow.settings import AgentSettings, HeartbeatSettings
    from hollow.stages import default_stages
    from kubecore.config import load_endpoint

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        pools = load_pools(pools_file)  # fails before any node is created, every problem listed
        default_stages()  # the shipped table (package data) is read and checked once, now
    except PoolsError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        endpoint = load_endpoint(kubeconfig)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    settings = AgentSettings(
        shard=shard,  # type: ignore[arg-type]
        heartbeat=HeartbeatSettings(factor=heartbeat_factor),
        api=ApiSettings(max_inflight=max_inflight),
        delete_nodes_on_exit=delete_nodes_on_exit,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        gang_barrier=gang_barrier,
    )
    if settings.heartbeat.renew_s * (1 + settings.heartbeat.renew_jitter) >= settings.heartbeat.node_monitor_grace_s:
        logging.getLogger("hollow").warning(
            "renew interval %.0fs is not below the node monitor grace period %.0fs: nodes will go NotReady",
            settings.heartbeat.renew_s, settings.heartbeat.node_monitor_grace_s)
    sys.exit(run_agent(endpoint, pools, settings))
