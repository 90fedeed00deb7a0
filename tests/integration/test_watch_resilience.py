"""Watchers that lose their place: resume from the resourceVersion, relist on 410 Gone, miss nothing.

How a real 410 is had, deterministically, on this apiserver (v1.36.3): a watch from
``resourceVersion=1``.  Not on pods: the session cluster's built-in watch caches were filled from
etcd revision ~1 and keep their history (and a watch older than a cache is served from etcd, which
has not compacted it), so ``rv=1`` on pods replays history instead of answering 410.  A custom
resource's watch cache, though, starts at the revision its CRD was established, so ``rv=1`` is older
than it and the apiserver answers ``ERROR 410 "too old resource version: 1 (N)"`` in the stream,
which is exactly what a watcher gets after an apiserver restart (every cache starts afresh) or a
stall long enough for its version to be compacted.  Both watch loops are generic over a collection
path, so they are tested on a CRD of this module's own (``probes.watchtest.hollowscale.io``).

Scenario: objects exist, a watcher sees them, then (while it is away) one is deleted, one created,
one changed; it comes back with a resume point that is gone.  It must relist (410), report the
deletion it missed, see the new object, yield nothing twice as new, and then follow live changes.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from waiting import wait_until

from hollow.api import ApiClient, ApiSettings
from hollow.metrics import Metrics
from hollow.watching import Watcher, WatchSettings
from kubecore.config import KubeEndpoint, load_endpoint
from kubecore.watch import SYNC, WatchState, list_then_watch, session_for

pytestmark = pytest.mark.integration

GROUP = "watchtest.hollowscale.io"
CRD = f"probes.{GROUP}"
JSON = {"Content-Type": "application/json"}


class Env:
    def __init__(self, endpoint: KubeEndpoint, namespace: str) -> None:
        self.ep = endpoint
        self.s = session_for(endpoint, 4)
        self.ns = namespace
        self.path = f"/apis/{GROUP}/v1/namespaces/{namespace}/probes"

    def create(self, name: str, labels: dict[str, str] | None = None) -> str:
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Probe", "metadata": {"name": name, "labels": labels or {}},
                "data": {"n": 0}}
        r = self.s.post(self.ep.server + self.path, data=orjson.dumps(body), headers=JSON, timeout=30)
        assert r.status_code == 201, r.text
        return str(r.json()["metadata"]["uid"])

    def delete(self, name: str) -> None:
        r = self.s.delete(f"{self.ep.server}{self.path}/{name}", timeout=30)
        assert r.status_code == 200, r.text

    def touch(self, name: str) -> None:
        r = self.s.patch(f"{self.ep.server}{self.path}/{name}", data=b'{"data":{"n":1}}',
                         headers={"Content-Type": "application/merge-patch+json"}, timeout=30)
        assert r.status_code == 200, r.text

    def uids(self) -> dict[str, str]:
        r = self.s.get(self.ep.server + self.path, timeout=30)
        r.raise_for_status()
        return {o["metadata"]["uid"]: o["metadata"]["name"] for o in r.json()["items"]}

    def rv1_is_gone(self) -> bool:
        """A watch from resourceVersion 1 answers 410 (as a status or an ERROR event)."""
        r = self.s.get(self.ep.server + self.path, params={"watch": "1", "resourceVersion": "1",
                                                             "timeoutSeconds": "1"}, timeout=30)
        if r.status_code == 410:
            return True
        return r.status_code == 200 and b'"code":410' in r.content and b"too old resource version" in r.content


@pytest.fixture(scope="module")
def env(cluster: Any) -> Iterator[Env]:
    ep = load_endpoint(cluster.kubeconfig)
    s = session_for(ep, 1)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": CRD},
           "spec": {"group": GROUP, "scope": "Namespaced",
                    "names": {"plural": "probes", "singular": "probe", "kind": "Probe"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    r = s.post(ep.server + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", data=orjson.dumps(crd),
               headers=JSON, timeout=30)
    assert r.status_code in (201, 409), r.text
    ns = f"watch-{uuid.uuid4().hex[:6]}"
    r = s.post(ep.server + "/api/v1/namespaces", data=orjson.dumps({"metadata": {"name": ns}}), headers=JSON,
               timeout=30)
    assert r.status_code == 201, r.text
    e = Env(ep, ns)
    try:
        # the CR's watch cache initialises after the CRD is established (429 "storage is (re)initializing"
        # until then); once it is up, a watch from rv 1 must really be 410 on this apiserver
        wait_until("a watch from resourceVersion 1 to answer 410 Gone", e.rv1_is_gone, 60)
        yield e
    finally:
        s.delete(f"{ep.server}/api/v1/namespaces/{ns}", timeout=30)
        s.delete(f"{ep.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}", timeout=30)


class Collected:
    """Runs list_then_watch in a thread and keeps what it yields."""

    def __init__(self, env: Env, state: WatchState) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.restarts: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        s = session_for(env.ep, 1)

        def run() -> None:
            for typ, obj, _t in list_then_watch(s, env.ep.server, env.path, self.stop.is_set,
                                                on_restart=self.restarts.append, state=state):
                with self.lock:
                    self.events.append((typ, obj))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def seen(self, typ: str) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {o["metadata"]["uid"]: o for t, o in self.events if t == typ}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(15)
        assert not self.thread.is_alive(), "list_then_watch did not stop"


def test_list_then_watch_relists_on_410_and_reports_missed_deletions(env: Env) -> None:
    uid = {n: env.create(n) for n in ("kw-a", "kw-b", "kw-c")}
    state = WatchState()
    first = Collected(env, state)
    try:
        wait_until("the LIST", lambda: set(uid.values()) <= set(first.seen(SYNC)), 30)
        uid["kw-d"] = env.create("kw-d")
        wait_until("ADDED kw-d", lambda: uid["kw-d"] in first.seen("ADDED"), 30)
    finally:
        first.close()
    assert set(state.known) == set(uid.values())

    # away: one deleted, one created, one changed; and the resume point is now older than the watch cache
    env.delete("kw-b")
    uid["kw-e"] = env.create("kw-e")
    env.touch("kw-a")
    state.resource_version = "1"

    second = Collected(env, state)
    try:
        wait_until("the relist's synthetic DELETED of kw-b", lambda: uid["kw-b"] in second.seen("DELETED"), 30)
        live = {uid[n] for n in ("kw-a", "kw-c", "kw-d", "kw-e")}
        assert live <= set(second.seen(SYNC))
        # live changes after the relist are followed
        uid["kw-f"] = env.create("kw-f")
        env.delete("kw-c")
        wait_until("ADDED kw-f and DELETED kw-c", lambda: uid["kw-f"] in second.seen("ADDED")
                   and uid["kw-c"] in second.seen("DELETED"), 30)
    finally:
        second.close()

    assert any("410" in r for r in second.restarts), second.restarts
    with second.lock:
        events = list(second.events)
    stub = next(o for t, o in events if t == "DELETED" and o["metadata"]["uid"] == uid["kw-b"])
    assert stub == {"metadata": {"uid": uid["kw-b"], "name": "kw-b", "namespace": env.ns}}
    # nothing yielded twice as new: relisted objects come as SYNC only, each once; no deletion twice
    added = [o["metadata"]["uid"] for t, o in events if t == "ADDED"]
    assert added == [uid["kw-f"]]
    syncs = [o["metadata"]["uid"] for t, o in events if t == SYNC]
    assert len(syncs) == len(set(syncs))
    deleted = [o["metadata"]["uid"] for t, o in events if t == "DELETED"]
    assert sorted(deleted) == sorted([uid["kw-b"], uid["kw-c"]])
    relisted_a = next(o for t, o in events if t == SYNC and o["metadata"]["uid"] == uid["kw-a"])
    assert relisted_a["data"]["n"] == 1  # the change made while away is in the relist
    # applying everything yielded by uid gives exactly what the server has
    view: dict[str, str] = {}
    for batch in (first.events, events):
        for t, o in batch:
            if t == "DELETED":
                view.pop(o["metadata"]["uid"], None)
            else:
                view[o["metadata"]["uid"]] = o["metadata"]["name"]
    assert view == env.uids()
    assert set(state.known) == set(view)


def test_list_then_watch_resumes_without_relisting(env: Env) -> None:
    """Watches end every few seconds (server timeout): each resumes from its version, no LIST again."""
    env.create("kr-a")
    state = WatchState()
    c = Collected(env, state)
    try:
        wait_until("the LIST", lambda: c.seen(SYNC), 30)
        n_sync = len(c.seen(SYNC))
        names = []
        for i in range(3):  # spread over more than one 5 s watch
            names.append(f"kr-{i}")
            env.create(names[-1])
            time.sleep(3)
        wait_until("ADDED of all", lambda: len(c.seen("ADDED")) >= 3, 30)
    finally:
        c.close()
    assert any(r.startswith("watch ended") for r in c.restarts)
    assert not any("410" in r or "error" in r for r in c.restarts), c.restarts
    with c.lock:
        assert sum(1 for t, _ in c.events if t == SYNC) == n_sync
        assert sorted(o["metadata"]["name"] for t, o in c.events if t == "ADDED") == names


class Recorder:
    """A hollow WatchHandler that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.relisted: list[set[str]] = []

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append((kind, obj["metadata"]["uid"]))

    def on_relisted(self, uids: set[str]) -> None:
        self.relisted.append(set(uids))


def test_hollow_watcher_relists_on_410_and_resumes_after_timeouts(env: Env) -> None:
    mine = {"watch-test": "hollow"}  # this module's other tests' objects live in the same namespace
    uid = {n: env.create(n, mine) for n in ("hw-a", "hw-b")}

    async def scenario() -> tuple[Recorder, Metrics, list[str]]:
        metrics = Metrics()
        api = ApiClient(env.ep, ApiSettings(), metrics)
        await api.start()
        rec = Recorder()
        # server-side timeout 1-2 s: the watch ends often and must resume from its version each time
        w = Watcher(api, "probes", env.path, {"labelSelector": "watch-test=hollow"}, rec, metrics,
                    WatchSettings(timeout_s=1.0))
        w.resource_version = "1"  # the resume point of a watcher whose apiserver restarted
        task = asyncio.ensure_future(w.run())
        created: list[str] = []
        try:
            async def until(what: str, check: Any, timeout: float = 30.0) -> None:
                deadline = time.monotonic() + timeout
                while not check():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.1)

            await until("the relist", lambda: rec.relisted)
            for i in range(3):
                created.append(await asyncio.to_thread(env.create, f"hw-n{i}", mine))
                await asyncio.sleep(1.5)
            await asyncio.to_thread(env.delete, "hw-a")
            await until("all events", lambda: len([k for k, _ in rec.events if k == "ADDED"]) >= 5
                        and ("DELETED", uid["hw-a"]) in rec.events)
            await asyncio.sleep(2.5)  # one more resume: nothing must come again
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await api.close()
        return rec, metrics, created

    rec, metrics, created = asyncio.run(scenario())
    assert metrics.watch_restarts.labels("probes", "gone")._value.get() == 1
    assert metrics.watch_restarts.labels("probes", "timeout")._value.get() >= 2  # resumed, not relisted
    assert len(rec.relisted) == 1 and rec.relisted[0] == set(uid.values())
    added = [u for k, u in rec.events if k == "ADDED"]
    assert sorted(added) == sorted([*uid.values(), *created])  # each object once: no replay on resume
    assert [u for k, u in rec.events if k == "DELETED"] == [uid["hw-a"]]
