"""Pieces of the local cluster backend that need no running control plane."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hollowscale.cluster.binaries import (
    binaries,
    ensure_module_tool,
    kube_command_binary,
    kube_wrapper_gomod,
    kubelet_binary,
    kueue_binary,
    module_tool_binary,
)
from hollowscale.cluster.components import apiserver, controller_manager
from hollowscale.cluster.local import LocalCluster
from hollowscale.cluster.pki import create_pki
from hollowscale.cluster.profiles import get_profile
from hollowscale.versions import KUBERNETES_VERSION, KUEUE_VERSION, STAGING_VERSION
from kubecore.procs import ProcessRecord, failure_reason, free_ports, spawn, stop
from kubecore.procs import record as process_record

UPSTREAM_GOMOD = """module k8s.io/kubernetes

go 1.26.0

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
\tk8s.io/klog/v2 v2.140.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""


def test_wrapper_gomod_replaces_staging_with_published_versions() -> None:
    text = kube_wrapper_gomod(UPSTREAM_GOMOD)
    assert f"require k8s.io/kubernetes {KUBERNETES_VERSION}" in text
    assert f"\tk8s.io/api => k8s.io/api {STAGING_VERSION}" in text
    assert f"\tk8s.io/client-go => k8s.io/client-go {STAGING_VERSION}" in text
    assert "klog" not in text  # only the v0.0.0 staging modules are replaced
    assert "go 1.26.0" in text
    assert "v0." + KUBERNETES_VERSION.split(".", 1)[1] == STAGING_VERSION


def test_binaries_are_cached_per_version(tmp_path: Path) -> None:
    bins = binaries(tmp_path)
    assert bins.kube_apiserver.parent.name == KUBERNETES_VERSION
    assert len(bins.missing()) == 5


def test_node_commands_and_module_tools_have_their_own_cache_paths(tmp_path: Path) -> None:
    kube = binaries(tmp_path).kube_apiserver.parent
    assert kube_command_binary("kubeadm", tmp_path) == kube / "kubeadm"
    assert kube_command_binary("kube-proxy", tmp_path) == kube / "kube-proxy"
    assert kubelet_binary(tmp_path) == kube / "kubelet"
    with pytest.raises(ValueError, match="kube-apiserver"):
        kube_command_binary("kube-apiserver", tmp_path)  # built with the control plane, not one by one
    # Kueue's cache path is the one it always had, so an existing cache is not rebuilt
    assert kueue_binary(tmp_path) == tmp_path / "bin" / f"kueue-{KUEUE_VERSION}" / "kueue"
    assert module_tool_binary("kind", "v0.33.0", tmp_path) == tmp_path / "bin" / "kind-v0.33.0" / "kind"


def test_a_cached_module_tool_is_not_rebuilt(tmp_path: Path) -> None:
    tool = module_tool_binary("kind", "v0.33.0", tmp_path)
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    # no Go runs: the package does not even exist
    assert ensure_module_tool("kind", "example.invalid/kind", "v0.33.0", "example.invalid/kind",
                              root=tmp_path) == tool


def test_profiles() -> None:
    scale = get_profile("scale")
    assert "--enable-priority-and-fairness=false" in scale.apiserver_flags
    assert scale.client_qps()["kube-scheduler"] == (5000.0, 10000)
    assert get_profile("default").apiserver_flags == ()
    with pytest.raises(ValueError, match="expected one of: default, scale"):
        get_profile("fast")


def test_pki_chain_and_identities(tmp_path: Path) -> None:
    pki = create_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    admin = x509.load_pem_x509_certificate(pki.admin.cert.read_bytes())
    admin.verify_directly_issued_by(ca)
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    eku = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in eku and ExtendedKeyUsageOID.SERVER_AUTH not in eku
    server = x509.load_pem_x509_certificate(pki.apiserver.cert.read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    assert oct(pki.ca.key.stat().st_mode & 0o777) == "0o600"


def test_apiserver_argv_follows_profile(tmp_path: Path) -> None:
    pki = create_pki(tmp_path / "pki")
    ports = dict(zip(["etcd", "etcd-peer", "etcd-metrics", "kube-apiserver", "kube-controller-manager",
                      "kube-scheduler"], free_ports(6), strict=True))
    default = apiserver.argv(LocalCluster(tmp_path, profile="default")._apiserver(pki, ports))
    scale = apiserver.argv(LocalCluster(tmp_path, profile="scale")._apiserver(pki, ports))
    assert "--authorization-mode=Node,RBAC" in default
    assert "--max-requests-inflight=0" not in default and "--max-requests-inflight=0" in scale
    kcm = controller_manager.argv(LocalCluster(tmp_path, profile="scale")._controller_manager(pki, ports))
    assert "--kube-api-qps=5000" in kcm and "--kube-api-burst=10000" in kcm


def test_free_ports_are_distinct() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6


@pytest.mark.integration  # starts a process
def test_stop_by_pid_and_start_time(tmp_path: Path) -> None:
    proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log", cwd=tmp_path)
    record = process_record("sleeper", proc)
    assert record.alive()
    # A record whose start time does not match is another process: never signalled.
    impostor = ProcessRecord("sleeper", record.pid, record.start_ticks + 1)
    assert not impostor.alive() and stop(impostor) is False and record.alive()
    started = time.monotonic()
    assert stop(record, grace_s=5) is True
    assert time.monotonic() - started < 5
    assert not record.alive() and proc.poll() is not None


@pytest.mark.integration  # starts a process
def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    record = process_record("stubborn", spawn([sys.executable, "-c", code], tmp_path / "s.log", cwd=tmp_path))
    deadline = time.monotonic() + 10
    while "ready" not in (tmp_path / "s.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    assert stop(record, grace_s=0.5) is True
    assert not record.alive()
    assert time.monotonic() - started >= 0.5  # SIGTERM was ignored; SIGKILL ended it after the grace


def test_failure_reason_prefers_error_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("I0101 starting\nE0101 12:00 listen tcp 127.0.0.1:6443: bind: address already in use\nI0101 bye\n")
    assert "address already in use" in failure_reason(log)
    assert failure_reason(tmp_path / "none.log") == "no log written"


@pytest.mark.integration  # starts a process
def test_cli_help_explains_commands() -> None:
    out = subprocess.run([sys.executable, "-m", "hollowscale", "cluster", "up", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--profile" in out and "scale" in out and "kubeconfig" in out
