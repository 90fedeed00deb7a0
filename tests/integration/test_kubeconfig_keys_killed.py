"""A process killed with SIGKILL after loading a kubeconfig with embedded keys leaves nothing in its temp
folder (kubecore.config keeps them in memory).  The official client's own loader, in the same process,
leaves the keys behind: that is what kubecore.config replaces, and it shows this test can fail."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kubeconfigs import cert_and_key, embedded_kubeconfig

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

OURS = "from kubecore.config import load_endpoint; load_endpoint(sys.argv[1]).ssl_context()"
CLIENTS = "from kubernetes import config; config.load_kube_config(sys.argv[1])  # on purpose: the client's own loader"


def _killed_after_loading(kubeconfig: Path, temp: Path, load: str) -> list[str]:
    """Run ``load`` in a fresh interpreter whose temp folder is ``temp``, SIGKILL it once it has loaded;
    what it left in ``temp``."""
    code = f"import sys\n{load}\nprint('loaded', flush=True)\nsys.stdin.read()\n"
    proc = subprocess.Popen([sys.executable, "-c", code, str(kubeconfig)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "loaded"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return sorted(p.name for p in temp.iterdir())


def test_a_killed_process_leaves_no_key_and_the_clients_loader_would(tmp_path: Path) -> None:
    cert, key = cert_and_key()
    kubeconfig = embedded_kubeconfig(tmp_path, cert, key)
    ours, clients = tmp_path / "ours", tmp_path / "clients"
    ours.mkdir()
    clients.mkdir()
    assert _killed_after_loading(kubeconfig, ours, OURS) == []
    left = _killed_after_loading(kubeconfig, clients, CLIENTS)
    assert left and {(clients / name).read_bytes() for name in left} >= {key, cert}
