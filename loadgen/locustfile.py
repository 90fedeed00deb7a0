"""Locust load for hollowscale: submit a scenario's workloads to any Kubernetes API server.

Run alone (web UI at http://127.0.0.1:8089)::

    locust -f loadgen/locustfile.py --kubeconfig ~/.kube/config --load-spec scenarios/smoke.yaml

headless, or distributed (``--processes N``; ``--master`` / ``--worker``); see ``loadgen/README.md``.
Every option is a flag, an env var (``LOCUST_KUBECONFIG``, ``LOCUST_LOAD_SPEC``, ...) and a
``locust.conf`` key.  The arrival curve of the spec drives the user count (:mod:`loadgen.shapes`);
each user paces itself at ``per_user_rate`` instances/s.  Each create is a Locust request
(``POST create Job distill/student``); scheduling/start/completion latencies are requests of type
SCHEDULE/START/COMPLETE (:mod:`loadgen.latency`).
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

# locust -f loads this file by path: make the repository importable for `loadgen.*`
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent
import orjson
from locust import events, task
from locust.contrib.fasthttp import FastHttpUser
from locust.runners import WorkerRunner

from kubecore.config import load_endpoint
from kubecore.namespaces import claim_namespace
from kubecore.tls import client_ssl_context
from kubecore.watch import session_for
from loadgen.latency import LatencyWatcher
from loadgen.shapes import make_shape_class
from loadgen.spec import load_spec
from loadgen.workloads import LABEL_RUN, WorkloadMix

log = logging.getLogger("loadgen")
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class _State:
    spec: dict[str, Any] | None = None
    endpoint: Any = None
    run_id: str = "adhoc"
    submitted = 0
    watcher: LatencyWatcher | None = None


STATE = _State()


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    g = parser.add_argument_group("hollowscale load")
    g.add_argument("--kubeconfig", type=str, env_var="LOCUST_KUBECONFIG",
                   default=os.environ.get("KUBECONFIG", ""), help="kubeconfig of the target cluster (default $KUBECONFIG)")
    g.add_argument("--load-spec", type=str, env_var="LOCUST_LOAD_SPEC", default="scenarios/smoke.yaml",
                   help="scenario YAML or resolved load-spec JSON (workloads + arrival)")
    g.add_argument("--namespace", type=str, env_var="LOCUST_NAMESPACE", default="",
                   help="namespace to submit to (default: the spec's)")
    g.add_argument("--run-id", type=str, env_var="LOCUST_RUN_ID", default="adhoc",
                   help="value of the hollowscale.io/run label on every object")
    g.add_argument("--no-latency-events", action="store_true", env_var="LOCUST_NO_LATENCY_EVENTS", default=False,
                   help="do not watch pods/jobs for SCHEDULE/START/COMPLETE events")
    g.add_argument("--no-create-namespace", action="store_true", env_var="LOCUST_NO_CREATE_NAMESPACE",
                   default=False, help="fail instead of creating the namespace")


def ssl_context_factory(endpoint: Any) -> Any:
    """A factory for geventhttpclient: the kubeconfig's CA and client certificate, from gevent.ssl."""

    def factory(*_args: Any, **_kwargs: Any) -> Any:
        import gevent.ssl

        return client_ssl_context(endpoint.ca_file, endpoint.cert_file, endpoint.key_file, endpoint.insecure,
                                  module=gevent.ssl)

    return factory


def _load(options: Any) -> None:
    if STATE.spec is not None:
        return
    spec = load_spec(options.load_spec)
    if options.namespace:
        spec["namespace"] = options.namespace
    STATE.spec = spec
    STATE.run_id = options.run_id or "adhoc"
    STATE.endpoint = load_endpoint(options.kubeconfig or None)
    JobSubmitter.ssl_context_factory = staticmethod(ssl_context_factory(STATE.endpoint))


@events.init.add_listener
def _init(environment: Any, **_kw: Any) -> None:
    opts = environment.parsed_options
    if opts is None:  # used as a library (tests): the caller sets STATE
        return
    _load(opts)
    if not environment.host:
        environment.host = STATE.endpoint.server


@events.test_start.add_listener
def _test_start(environment: Any, **_kw: Any) -> None:
    if isinstance(environment.runner, WorkerRunner) or STATE.spec is None:
        return
    opts = environment.parsed_options
    if not (opts and opts.no_create_namespace):
        claim_namespace(session_for(STATE.endpoint, 1), STATE.endpoint.server, STATE.spec["namespace"], STATE.run_id)
    if not (opts and opts.no_latency_events):
        STATE.watcher = LatencyWatcher(environment, STATE.endpoint, STATE.spec["namespace"],
                                       None if STATE.run_id == "adhoc" else STATE.run_id)
        STATE.watcher.start()


@events.test_stop.add_listener
def _test_stop(environment: Any, **_kw: Any) -> None:
    if STATE.watcher is not None:
        STATE.watcher.stop()
        STATE.watcher = None


class JobSubmitter(FastHttpUser):
    """Submits one workload instance per iteration, paced at the spec's ``per_user_rate``."""

    concurrency = 1
    insecure = False
    network_timeout = 30.0
    connection_timeout = 10.0

    def on_start(self) -> None:
        spec = STATE.spec
        assert spec is not None, "load spec not loaded (pass --load-spec)"
        arrival = spec["arrival"]
        self.rate = float(arrival.get("per_user_rate") or 1.0)
        self.poisson = arrival["curve"] == "poisson"
        worker = getattr(self.environment.runner, "worker_index", 0)
        self.stream = f"{worker}-{id(self):x}"
        self.mix = WorkloadMix(spec, run_id=STATE.run_id, stream=self.stream)
        self.rng = random.Random(f"{arrival.get('seed', 1)}/pace/{self.stream}")
        self.max_instances = arrival.get("max_instances")
        gevent.sleep(self.rng.uniform(0, 1.0 / self.rate))  # spread users' phases
        self.next_at = time.time()

    def wait_time(self) -> float:
        gap = self.rng.expovariate(self.rate) if self.poisson else 1.0 / self.rate
        now = time.time()
        # keep the schedule (constant throughput) but never build more than one slot of backlog
        self.next_at = max(self.next_at + gap, now - 1.0 / self.rate)
        return max(0.0, self.next_at - now)

    @task
    def submit(self) -> None:
        if self.max_instances is not None and STATE.submitted >= int(self.max_instances):
            return
        STATE.submitted += 1
        for sub in self.mix.next_instance():
            with self.client.post(sub.path, data=orjson.dumps(sub.body),  # type: ignore[arg-type]  # bytes are sent as is
                                  headers=HEADERS,
                                  name=f"create {sub.kind} {sub.workload}/{sub.role}",
                                  catch_response=True) as resp:
                if resp.status_code != 201:
                    resp.failure(f"HTTP {resp.status_code}: {(resp.text or '')[:200]}")
                    break  # the instance is incomplete: do not create its other roles


ArrivalShape = make_shape_class(lambda: STATE.spec["arrival"])  # type: ignore[index]
