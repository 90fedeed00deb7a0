"""``cluster.backend: kind``: a kind cluster (Kubernetes in containers), through the ``kind`` CLI.

The embedded local cluster (:mod:`hollowscale.cluster.local`) needs no container engine and is what most
of the test suite runs; kind is the alternative for users who want real nodes as containers. The engine
is the user's Docker or, for :mod:`hollowscale.backends.kind`, hollowscale's own podman with a node image
built here (:mod:`hollowscale.kindnode`). This module only drives the
``kind`` CLI: it creates the cluster from ``kind-config.yaml`` (or reuses one of the same name), loads
the images the manifests need (the distill image, built by :func:`hollowscale.images.build_images` as an
OCI archive, loaded with ``kind load image-archive``: containerd's ``ctr images import`` in every node),
writes a kubeconfig and hands its path back. :func:`delete_kind_cluster` deletes only a cluster this
module created, never one the user already had.

Interruptions: kind runs in its own process group, so a Ctrl-C at the terminal reaches the harness only;
the harness then kills kind's whole group (kind and the engine commands it started) and, when it was
creating the cluster, deletes what kind had made so far. kind itself deletes a cluster whose creation
failed.  On podman this is run end to end by ``tests/integration/test_run_kind_backend.py``; with Docker
only the missing-tool errors are tested here (Docker's ``--privileged`` cannot start on this machine
kind: docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hollowscale.cluster.realnode.access import RealNodeError
from hollowscale.images import BuiltImage
from hollowscale.paths import REPO_ROOT

#: ``kind-config.yaml`` at the repository root.
DEFAULT_CONFIG = REPO_ROOT / "kind-config.yaml"
#: kind's own rule for cluster names (sigs.k8s.io/kind pkg/internal/apis/config/validate.go).
VALID_NAME = re.compile(r"^[a-z0-9.-]+$")
KIND_INSTALL_HINT = "install kind v0.33.0: go install sigs.k8s.io/kind@v0.33.0 (https://kind.sigs.k8s.io)"
DOCKER_HINT = "kind runs its nodes as Docker containers: install Docker and start its daemon"

BuildFn = Callable[[Sequence[str]], list[BuiltImage]]


class KindError(RuntimeError):
    """The kind backend cannot do what was asked (a tool missing, a kind command failed)."""


@dataclass(frozen=True)
class KindSettings:
    """What :func:`ensure_kind_cluster` creates or reuses.

    Attributes:
        kubeconfig: where the cluster's kubeconfig is written (e.g. ``<run dir>/kubeconfig``).
        name: kind cluster name (kind's rule: lowercase letters, digits, ``.`` and ``-``).
        config: the kind config file used when the cluster is created (ignored on reuse).
        images: image recipes to build and load (:func:`hollowscale.images.build_images` names).
        wait_s: seconds ``kind create cluster --wait`` waits for the control plane to be Ready.
        kind: the kind executable (a name looked up on PATH, or a path).
        docker: the docker executable (a name looked up on PATH, or a path).
        engine: the container engine kind runs its nodes in: ``docker`` (kind's default, the user's own
            Docker) or ``podman`` (``KIND_EXPERIMENTAL_PROVIDER=podman``; the harness's own podman,
            :mod:`hollowscale.kindnode.engine`, put first on ``env``'s PATH).
        env: the environment kind runs with (None: this process's).
    """

    kubeconfig: Path
    name: str = "hollowscale"
    config: Path = DEFAULT_CONFIG
    images: tuple[str, ...] = ("distill",)
    wait_s: float = 300.0
    kind: str = "kind"
    docker: str = "docker"
    engine: str = "docker"
    env: Mapping[str, str] | None = None


@dataclass
class KindCluster:
    """A kind cluster in use.

    Attributes:
        name: kind cluster name.
        kubeconfig: path of the kubeconfig written for it.
        created: True when :func:`ensure_kind_cluster` created it (then :func:`delete_kind_cluster`
            deletes it); False when it existed already (then it is left alone).
        loaded_images: references of the images loaded into its nodes.
        kind: the resolved kind executable.
        env: the environment kind runs with (None: this process's).
    """

    name: str
    kubeconfig: Path
    created: bool
    loaded_images: list[str] = field(default_factory=list)
    kind: str = "kind"
    env: Mapping[str, str] | None = None

    def load_image(self, image: BuiltImage, nodes: Sequence[str] = ()) -> None:
        """``kind load image-archive``: the image into the containerd of ``nodes`` (default: every node);
        there is no registry."""
        _kind(self.kind, ["load", "image-archive", str(image.archive), "--name", self.name,
                          *(["--nodes", ",".join(nodes)] if nodes else [])], 900,
              f"loading {image.name} into kind cluster {self.name}", self.env)
        self.loaded_images.append(image.name)


@dataclass(frozen=True)
class KindRealNodes:
    """A kind cluster's workers as the run's real nodes (:mod:`hollowscale.cluster.realnode.access`).

    Attributes:
        cluster: the cluster.
        workers: its worker nodes' names (kind's container names); images go only there.
        mounts: this machine's folders mounted into every worker when the cluster was created
            (host path -> path inside the node), read-only.
    """

    cluster: KindCluster
    workers: tuple[str, ...]
    mounts: Mapping[str, str] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.workers)

    @property
    def pod_apiserver(self) -> tuple[str, int] | None:
        return None  # kind routes the kubernetes Service (kube-proxy runs on every node)

    def load_images(self, images: Sequence[BuiltImage], log: Callable[[str], None]) -> None:
        for image in images:
            log(f"loading {image.name} into {', '.join(self.workers)} (kind load image-archive)")
            self.cluster.load_image(image, self.workers)

    def host_dir(self, path: Path) -> str:
        inside = self.mounts.get(str(path.resolve()))
        if inside is None:
            raise RealNodeError(f"{path} is not mounted into the kind cluster {self.cluster.name}'s nodes (mounted: "
                                f"{', '.join(self.mounts) or 'nothing'}); a kind node sees only what was mounted when "
                                "the cluster was created: delete it and run again")
        return inside


def check_tools(settings: KindSettings) -> str:
    """The kind executable's path, once kind and a running Docker are both there.

    Raises:
        KindError: naming everything missing at once (kind not found; docker not found, or its daemon
            not answering ``docker info``), with what to install.
    """
    problems: list[str] = []
    kind = shutil.which(settings.kind)
    if kind is None:
        problems.append(f"`{settings.kind}` not found on PATH ({KIND_INSTALL_HINT})")
    if settings.engine == "podman":
        podman = shutil.which("podman", path=(settings.env or {}).get("PATH"))
        if podman is None:
            problems.append("`podman` not found on the PATH kind is given (hollowscale's podman: "
                            "python -m hollowscale kind node-image prepares it)")
        if problems:
            raise KindError("cluster.backend kind cannot run here: " + "; ".join(problems))
        assert kind is not None
        return kind
    docker = shutil.which(settings.docker)
    if docker is None:
        problems.append(f"`{settings.docker}` not found on PATH ({DOCKER_HINT})")
    else:
        try:
            p = subprocess.run(
                [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
            )
            if p.returncode != 0:
                why = (p.stderr.strip() or p.stdout.strip()).splitlines()
                problems.append(
                    f"Docker is not running: `docker info` failed ({why[-1] if why else p.returncode}; {DOCKER_HINT})"
                )
        except subprocess.TimeoutExpired:
            problems.append(f"Docker is not answering: `docker info` took more than 30 s ({DOCKER_HINT})")
    if problems:
        raise KindError("cluster.backend kind cannot run here: " + "; ".join(problems))
    assert kind is not None
    return kind


def _kind(kind: str, args: list[str], timeout_s: float, what: str, env: Mapping[str, str] | None = None) -> str:
    """Run ``kind ARGS``; its stdout, or KindError with the command and kind's own message."""
    cmd = [kind, *args]
    try:
        # its own session: a terminal's Ctrl-C interrupts the harness, which then stops kind's whole group
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(env) if env is not None else None, start_new_session=True)
    except OSError as e:
        raise KindError(f"{what}: cannot run `{kind}`: {e} ({KIND_INSTALL_HINT})") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise KindError(f"{what}: `{' '.join(cmd)}` did not finish in {timeout_s:.0f} s") from None
    except BaseException:  # interrupted: kind and the engine commands it started go with it
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        raise KindError(f"{what}: `{' '.join(cmd)}` exited {proc.returncode}:\n{kind_failure(stderr or stdout)}")
    return stdout


#: lines of kind's and kubeadm's output that say what failed
_FAILURE_LINE = re.compile(r"^ERROR:|\[ERROR|error execution phase|\berror:|timed out|[Ff]ailed to")


def kind_failure(output: str, tail: int = 15) -> str:
    """What a failed kind command said: its ``ERROR:`` line and kubeadm's error lines first, then its
    last ``tail`` lines.

    Why: when a node fails to join, kind prints kubeadm's whole output and ends with a Go stack trace,
    so the last lines alone say where kubeadm stopped, never why.
    """
    lines = output.strip().splitlines()
    said = list(dict.fromkeys(line.strip() for line in lines if _FAILURE_LINE.search(line)))[:10]
    last = lines[-tail:]
    return "\n".join([*said, "... its last lines:", *last] if said else last)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc``'s process group (it leads its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def kind_clusters(kind: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Names of the kind clusters that exist (``kind get clusters``)."""
    out = _kind(kind, ["get", "clusters"], 60, "listing kind clusters", env)
    return [line.strip() for line in out.splitlines() if line.strip()]


def ensure_kind_cluster(settings: KindSettings, build: BuildFn | None = None) -> KindCluster:
    """Create (or reuse) the kind cluster, load the images, write the kubeconfig; what the run uses.

    Reuse: a cluster named ``settings.name`` that already exists is used as it is (its own config, not
    ``settings.config``) and is never deleted by :func:`delete_kind_cluster`. Images are built with
    ``build`` (default :func:`hollowscale.images.build_images`) before the cluster is created, so a
    build failure leaves nothing behind.

    Raises:
        KindError: kind or Docker missing, a bad name or config path, or a kind command failed (a
            cluster this call created is deleted again before the error is raised).
    """
    if not VALID_NAME.match(settings.name):
        raise KindError(f"kind cluster name {settings.name!r} is invalid: kind needs {VALID_NAME.pattern}")
    kind = check_tools(settings)
    archives: list[BuiltImage] = []
    if settings.images:
        if build is None:
            from hollowscale.images import build_images

            build = build_images
        archives = build(list(settings.images))
    settings.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    env = settings.env
    created = settings.name not in kind_clusters(kind, env)
    if created:
        if not settings.config.is_file():
            raise KindError(
                f"kind config {settings.config} does not exist (expected kind-config.yaml at the repo root)"
            )
        try:
            _kind(kind, ["create", "cluster", "--name", settings.name, "--config", str(settings.config),
                         "--kubeconfig", str(settings.kubeconfig), "--wait", f"{settings.wait_s:.0f}s"],
                  settings.wait_s + 600, f"creating kind cluster {settings.name}", env)
        except KindError:
            raise  # kind deletes a cluster whose creation failed
        except BaseException as interrupt:  # interrupted half-way: what kind made so far is ours, and goes
            try:
                delete_kind_cluster(KindCluster(settings.name, settings.kubeconfig, True, kind=kind, env=env))
            except KindError as exc:  # the interrupt stays what the run ends with; what is left is said
                interrupt.add_note(f"left behind: {exc}")
            raise
    else:
        _kind(
            kind,
            ["export", "kubeconfig", "--name", settings.name, "--kubeconfig", str(settings.kubeconfig)],
            60,
            f"writing the kubeconfig of kind cluster {settings.name}",
            env,
        )
    cluster = KindCluster(settings.name, settings.kubeconfig, created, kind=kind, env=env)
    try:
        for image in archives:
            cluster.load_image(image)
    except BaseException:  # a failed or interrupted load: a cluster made here goes (a reused one stays)
        delete_kind_cluster(cluster)
        raise
    return cluster


#: tries of `kind delete cluster` while a node's mounts are still busy, DELETE_RETRY_S x try apart
DELETE_ATTEMPTS = 4
DELETE_RETRY_S = 2.0


def delete_kind_cluster(cluster: KindCluster) -> bool:
    """Delete the cluster if :func:`ensure_kind_cluster` created it; True when it was deleted.

    A reused cluster (``created`` False) is the user's: it is left running and False is returned.
    """
    if not cluster.created:
        return False
    for attempt in range(1, DELETE_ATTEMPTS + 1):
        try:
            _kind(
                cluster.kind,
                ["delete", "cluster", "--name", cluster.name, "--kubeconfig", str(cluster.kubeconfig)],
                300,
                f"deleting kind cluster {cluster.name}",
                cluster.env,
            )
            return True
        except KindError as exc:
            # a node whose engine command was killed mid-way (an interrupted create) holds its mounts a
            # moment longer: `podman rm` fails with EBUSY, and succeeds once they are released
            if "resource busy" not in str(exc) or attempt == DELETE_ATTEMPTS:
                raise
            time.sleep(DELETE_RETRY_S * attempt)
    return True
