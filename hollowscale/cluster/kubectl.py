"""The cached kubectl against one kubeconfig, for the components a local cluster installs (Kueue, JobSet):
server-side apply of their manifests, ``wait``, tokens.  Each component raises its own error class, so the
cluster's start can say which component failed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml


class KubectlError(RuntimeError):
    """A kubectl call failed; one line saying which and why."""


class Kubectl:
    """kubectl against ``kubeconfig``; a failure raises ``error`` (default :class:`KubectlError`) with the last
    line of its stderr."""

    def __init__(self, binary: Path, kubeconfig: Path, error: type[RuntimeError] = KubectlError) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.error = error

    def __call__(self, *args: str, stdin: str | None = None, timeout_s: float = 120.0) -> str:
        cmd = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]
        try:
            out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise self.error(f"kubectl {' '.join(args[:3])} timed out after {timeout_s:g}s") from None
        if out.returncode != 0:
            lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
            raise self.error(f"kubectl {' '.join(args[:3])} failed: {lines[-1] if lines else out.returncode}")
        return out.stdout

    def apply(self, objects: list[dict[str, Any]] | Path) -> None:
        """Server-side apply (field manager ``hollowscale``) of objects or of a file/dir of manifests."""
        common = ["apply", "--server-side", "--force-conflicts", "--field-manager=hollowscale"]
        if isinstance(objects, Path):
            self(*common, "-f", str(objects))
        else:
            self(*common, "-f", "-", stdin=yaml.safe_dump_all(objects, sort_keys=False))
