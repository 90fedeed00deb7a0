"""Locust load for hollowscale: submit a scenario's workloads to any Kubernetes API server.

Run alone (web UI at http://127.0.0.1:8089)::

    locust -f loadgen/locustfile.py --kubeconfig ~/.kube/config --load-spec scenarios/smoke.yaml

headless, or distributed (``--processes N``; ``--master`` / ``--worker``); see ``loadgen/README.md``.
Every option is a flag, an env var (``LOCUST_KUBECONFIG``, ``LOCUST_LOAD_SPEC``, ...) and a
``locust.conf`` key.  The arrival curve of the spec drives the user count (:mod:`loadgen.shapes`);
each user paces itself at ``per_user_rate`` instances/s.  Each create is a Locust request
(``POST create Job distill/student``, ``POST create PodGroup distill`` for an instance's group
objects, which go first); with tenants each instance goes to a tenant drawn by share and every tenant's
namespace is claimed at test start; the DRA roles' ResourceClaimTemplates are created then too; scheduling/start/completion latencies are requests of type
SCHEDULE/START/COMPLETE (:mod:`loadgen.latency`).  The spec is a :class:`loadgen.spec.LoadSpec`
(:func:`loadgen.spec.load_spec`); one that does not validate stops Locust with every problem listed.
Creates authenticate per request with the kubeconfig's bearer token when it has one (refreshed for
exec plugins) and with its client certificate through the TLS context otherwise.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# locust -f loads this file by path: make the repository importable for `loadgen.*`
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gevent
import orjson
from locust import events, task
from locust.contrib.fasthttp import FastHttpUser
from locust.runners import WorkerRunner

from kubecore.config import KubeconfigError, KubeEndpoint, load_endpoint
from kubecore.namespaces import claim_namespace
from kubecore.schema import SpecError
from kubecore.tls import client_ssl_context
from kubecore.watch import session_for
from loadgen.finalstats import write_final_csvs
from loadgen.latency import LatencyWatcher
from loadgen.shapes import make_shape_class
from loadgen.spec import ArrivalSpec, LoadSpec, load_spec
from loadgen.workloads import WorkloadMix, claim_templates

log = logging.getLogger("loadgen")
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class _State:
    spec: LoadSpec | None = None
    endpoint: KubeEndpoint | None = None
    run_id: str = "adhoc"
    submitted = 0
    users_started = 0  # each user of this worker takes the next number as its stream (see ``on_start``)
    watcher: LatencyWatcher | None = None
    environment: Any = None


STATE = _State()


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    g = parser.add_argument_group("hollowscale load")
    g.add_argument("--kubeconfig", type=str, env_var="LOCUST_KUBECONFIG",
                   default=os.environ.get("KUBECONFIG", ""), help="kubeconfig of the target cluster (default $KUBECONFIG)")
    g.add_argument("--load-spec", type=str, env_var="LOCUST_LOAD_SPEC", default="scenarios/smoke.yaml",
                   help="scenario YAML, or a load spec (loadspec.json as a run writes it, or YAML)")
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


def request_headers(endpoint: KubeEndpoint) -> Callable[[], dict[str, str]]:
    """Headers for each create: the static ones, plus the endpoint's current bearer token when it has
    one (an exec plugin's token expires; :meth:`KubeEndpoint.auth_headers` refreshes it, at most one
    plugin call per :data:`kubecore.config.TOKEN_RECHECK_S`).  mTLS endpoints pay nothing per request."""
    if endpoint.token is None and endpoint.refresh is None:
        return lambda: HEADERS
    return lambda: {**HEADERS, **endpoint.auth_headers()}


def _load(options: Any) -> None:
    if STATE.spec is not None:
        return
    try:
        spec = load_spec(options.load_spec)
        if options.namespace:
            spec = spec.with_namespace(options.namespace)
        endpoint = load_endpoint(options.kubeconfig or None)
    except (SpecError, KubeconfigError) as exc:
        # SystemExit passes through Locust's event hooks: the run stops here with the message
        raise SystemExit(f"loadgen: {exc}") from None
    STATE.spec = spec
    STATE.run_id = options.run_id or "adhoc"
    STATE.endpoint = endpoint
    JobSubmitter.ssl_context_factory = staticmethod(ssl_context_factory(endpoint))
    JobSubmitter.headers = staticmethod(request_headers(endpoint))


@events.init.add_listener
def _init(environment: Any, **_kw: Any) -> None:
    opts = environment.parsed_options
    if opts is None:  # used as a library (tests): the caller sets STATE
        return
    STATE.environment = environment
    _load(opts)
    if not environment.host and STATE.endpoint is not None:
        environment.host = STATE.endpoint.server


@events.test_start.add_listener
def _test_start(environment: Any, **_kw: Any) -> None:
    if isinstance(environment.runner, WorkerRunner) or STATE.spec is None or STATE.endpoint is None:
        return
    opts = environment.parsed_options
    namespaces = STATE.spec.namespaces()  # every tenant's, else the one namespace
    session = session_for(STATE.endpoint, 1)
    if not (opts and opts.no_create_namespace):
        for ns in namespaces:
            claim_namespace(session, STATE.endpoint.server, ns, STATE.run_id)
    for sub in claim_templates(STATE.spec, STATE.run_id):  # DRA roles' templates (a run made them already: 409)
        r = session.post(STATE.endpoint.server + sub.path, data=orjson.dumps(sub.body),
                         headers={"Content-Type": "application/json"}, timeout=30)
        if r.status_code not in (201, 409):  # the pods that name it will fail to create and say so
            log.warning("creating ResourceClaimTemplate %s: HTTP %s: %s", sub.body["metadata"]["name"], r.status_code,
                        r.text[:300])
    if not (opts and opts.no_latency_events):
        STATE.watcher = LatencyWatcher(environment, STATE.endpoint, namespaces,
                                       None if STATE.run_id == "adhoc" else STATE.run_id)
        STATE.watcher.start()


@events.test_stop.add_listener
def _test_stop(environment: Any, **_kw: Any) -> None:
    if STATE.watcher is not None:
        STATE.watcher.stop()
        STATE.watcher = None


@events.quit.add_listener
def _quit(**_kw: Any) -> None:
    # Locust's CSVs lag its stats by up to a second at exit: write the final figures (finalstats)
    env = STATE.environment
    prefix = getattr(env.parsed_options, "csv_prefix", None) if env is not None else None
    if prefix and not isinstance(env.runner, WorkerRunner):
        write_final_csvs(env, prefix)


class JobSubmitter(FastHttpUser):
    """Submits one workload instance per iteration, paced at the spec's ``per_user_rate``."""

    concurrency = 1
    insecure = False
    #: seconds a create may wait for its answer (a stalled apiserver costs each user at most this, then
    #: the create fails as "no response" and the user goes on at its pace; nothing waits for ever)
    network_timeout = 30.0
    #: seconds to open a connection (a stopped apiserver's kernel still accepts: network_timeout bounds the rest)
    connection_timeout = 10.0
    #: per-request headers (set from the endpoint when the spec is loaded)
    headers: Callable[[], dict[str, str]] = staticmethod(lambda: HEADERS)

    def on_start(self) -> None:
        spec = STATE.spec
        assert spec is not None, "load spec not loaded (pass --load-spec)"
        arrival = spec.arrival
        self.rate = arrival.per_user_rate
        self.poisson = arrival.curve == "poisson"
        worker = getattr(self.environment.runner, "worker_index", 0)
        # the user's place among this worker's users, so that a seed gives the same instances, kinds and pace
        # run after run (an object id here made every run's mix a new draw)
        self.stream = f"{worker}-{STATE.users_started}"
        STATE.users_started += 1
        self.mix = WorkloadMix(spec, run_id=STATE.run_id, stream=self.stream)
        self.rng = random.Random(f"{arrival.seed}/pace/{self.stream}")
        self.max_instances = arrival.max_instances
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
        if self.max_instances is not None and STATE.submitted >= self.max_instances:
            return
        STATE.submitted += 1
        for sub in self.mix.next_instance():
            with self.client.post(sub.path, data=orjson.dumps(sub.body),  # type: ignore[arg-type]  # bytes are sent as is
                                  headers=self.headers(),
                                  name=sub.request_name,
                                  catch_response=True) as resp:
                if resp.status_code != 201:
                    if not resp.status_code:  # no answer: timeout or connection error (a stalled apiserver)
                        err = getattr(resp, "error", None)
                        resp.failure(f"no response: {err.__class__.__name__}: {err}" if err else "no response")
                    else:
                        resp.failure(f"HTTP {resp.status_code}: {(resp.text or '')[:200]}")
                    break  # the instance is incomplete: do not create its other roles


def _arrival() -> ArrivalSpec:
    assert STATE.spec is not None, "load spec not loaded (pass --load-spec)"
    return STATE.spec.arrival


ArrivalShape = make_shape_class(_arrival)
