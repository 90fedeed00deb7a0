"""Shared fixtures.

``cluster`` brings ONE real local control plane up for the whole test session (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler as processes, built from the Go module
proxy by ``make setup``) and tears it down at the end, also when tests fail or the run is
interrupted.  There is no fake API server anywhere in this suite.

``real_cluster`` is that same session cluster with one real node added (``hs-real-0``: a real kubelet
and its own containerd, pods on the cluster's private bridge; needs root and ``make setup-test``).
It is added to the shared cluster rather than started as a second one: a real node is tainted
``hollowscale.io/real-node=true:NoSchedule`` and labelled ``hollowscale.io/node-kind=real``, so no pod
of another test lands there (every test that counts nodes selects its own pool label), and one
control plane is cheaper than two.  Put a pod there with
:func:`hollowscale.cluster.realnode.pod_placement` (selector + toleration) and
``imagePullPolicy: Never`` with :data:`hollowscale.images.BUSYBOX_IMAGE`.  The node goes down with the
session cluster (``LocalCluster.down`` removes its containers, mounts, network namespaces, bridge).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import rootcheck
import seeding
import sessionguard
import tmpguard

from hollowscale.cluster import clusterdir
from hollowscale.cluster.binaries import binaries
from hollowscale.cluster.local import ClusterError, ClusterInfo, LocalCluster
from hollowscale.paths import short_temp_dir

ARTIFACTS = Path(__file__).parent / ".artifacts"


def pytest_configure(config: pytest.Config) -> None:
    """Mark this session's processes before any test starts one (see sessionguard); fix the session's
    random seed (see seeding) before pytest-xdist starts its workers, which inherit it; list the temp
    folders and give the session one of its own (see tmpguard)."""
    sessionguard.mark_session()
    seeding.session_seed()
    tmpguard.start(config)
    seeding.configure_hypothesis()


def pytest_report_header(config: pytest.Config) -> str:
    """The seed every test's random state comes from, and how to run with it again."""
    return seeding.header()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures: the global random generators seeded from the session's seed and the test."""
    seeding.seed_globals(item.nodeid)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test: stop a session that cannot keep its guards (one line each, nothing run)."""
    for why_not in (rootcheck.refusal(session.items, os.geteuid()), sessionguard.unmarked_integration(session.items)):
        if why_not:
            raise pytest.UsageError(why_not)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test`` runs the integration tier on 2 workers, ``--dist loadgroup``):
    each module runs whole on one worker (its module fixtures are made once), and every test that
    needs root runs on the same worker, one at a time, because real nodes share host state that two
    clusters cannot both hold (the device plugins' kubelet socket under /var/lib/kubelet, the host
    claims in /run/hollowscale, the kubelet's sysctls). Without xdist the mark does nothing."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = "needs-root" if rootcheck.needs_root(item) else item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))


@contextlib.contextmanager
def short_tmp(prefix: str) -> Iterator[Path]:
    """A fresh folder of ours with a short path, removed after: a cluster folder holds unix sockets
    (containerd, the kubelet's plugins) whose paths may not pass 107 bytes, and pytest's own temp
    paths come close (longer still under xdist: ``.../popen-gw1/...``)."""
    path = short_temp_dir(prefix)
    try:
        yield path
    finally:
        # never remove through a mount a failed teardown left (a kubelet's root dir, a pod's volume)
        if not any(m == str(path) or m.startswith(f"{path}/") for m in clusterdir.mount_points()):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """:func:`short_tmp` for one test."""
    with short_tmp("hs-t-") as path:
        yield path


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test without the integration marker runs with process creation refused (see sessionguard)."""
    if request.node.get_closest_marker("integration") is not None:
        yield
        return
    with sessionguard.refuse_processes(request.node.nodeid):
        yield


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process this session started is still running (ended first, then named), or if
    it left files or folders in the temp folders (named, keys first; see tmpguard)."""
    sessionguard.fail_on_leftovers(session)
    tmpguard.finish(session)


@pytest.fixture(scope="session")
def _session_dir() -> Iterator[Path]:
    """The session cluster's parent folder: $HOLLOWSCALE_TEST_CLUSTER_DIR, else a short one of ours."""
    given = os.environ.get("HOLLOWSCALE_TEST_CLUSTER_DIR")
    if given:
        yield Path(given)
        return
    with short_tmp("hs-session-") as path:
        yield path


@pytest.fixture(scope="session")
def cluster(_session_dir: Path) -> Iterator[ClusterInfo]:
    """A running local cluster (default profile) shared by every integration test (of one xdist worker)."""
    missing = binaries().missing()
    if missing:
        pytest.fail(f"control-plane binary missing: {missing[0]} -- run `make setup` first", pytrace=False)
    cluster_dir = _session_dir
    local = LocalCluster(cluster_dir / "cp", profile="default")
    info = local.up(timeout_s=180)
    try:
        yield info
    finally:
        logs = cluster_dir / "cp" / "logs"
        if logs.exists():  # keep the component logs for post-mortems
            ARTIFACTS.mkdir(exist_ok=True)
            target = ARTIFACTS / f"cluster-logs-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
            target.mkdir(exist_ok=True)
            for log in logs.iterdir():
                (target / log.name).write_bytes(log.read_bytes())
        local.down()


@pytest.fixture(scope="session")
def real_cluster(cluster: ClusterInfo) -> ClusterInfo:
    """The session cluster with one real node (``info.real_nodes[0]``, ``info.pod_network``); ~20 s once."""
    local = LocalCluster(cluster.dir)
    info = local.info()
    if info is None:
        pytest.fail(f"the session cluster in {cluster.dir} is not running", pytrace=False)
    if not info.real_nodes:
        try:
            local.add_real_nodes(1, timeout_s=120)
        except ClusterError as exc:
            pytest.fail(f"could not add a real node to the session cluster: {exc}", pytrace=False)
        info = local.info()
        assert info is not None
    return info


@pytest.fixture(scope="session")
def kubectl(cluster: ClusterInfo) -> list[str]:
    """argv prefix for the cached kubectl, pointed at the test cluster."""
    return [str(binaries().kubectl), f"--kubeconfig={cluster.kubeconfig}"]
