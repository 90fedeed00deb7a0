"""CDI for a containerd without CDI: a wrapper around runc that applies a container's CDI devices.

Why: the kubelet hands a prepared claim's CDI device IDs to the runtime only in the CRI field
``ContainerConfig.CDIDevices`` (since 1.31 no longer as annotations: ``pkg/kubelet/cm/dra/manager.go``),
and Debian 12's containerd 1.6.20 knows neither that field nor any CDI setting (``enable_cdi`` and
``cdi_spec_dirs`` came with 1.7): it drops the IDs without a word, and the container never sees its device.

What: a real node with DRA GPUs runs its containerd with the runc runtime's ``BinaryName`` set to a small
shell script (:func:`wrapper_script`, written by the real-node pool), the way NVIDIA's container runtime
sits in front of runc.  Every runc call but ``create`` goes straight to runc.  For ``create`` of an
application container (annotation ``io.kubernetes.cri.container-type: container``; sandboxes are left
alone) this module asks the kubelet which CDI devices the container got: the kubelet's pod-resources API
``Get`` (``<kubelet-root>/pod-resources/kubelet.sock``; GA and on in 1.36) lists, per container, the claims
it uses and their CDI device IDs, exactly the IDs the kubelet would have put in ``CDIDevices``.  Those are
resolved in the node's CDI dir and applied to the bundle's ``config.json``
(:func:`hollowscale.draplugin.cdi.apply_edits`), then runc runs.  A container without devices costs one
local gRPC call.

Limits (those of the pod-resources API): init containers that are not sidecars are not listed there, so
they get no devices; ``kubectl exec`` into the container does not see the edited environment (containerd
builds an exec's process from its own copy of the spec), the container's processes do.  Errors (the
kubelet not answering, a device no spec defines) fail the create with a runc-style message in runc's log,
so the kubelet reports it on the pod and tries again.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CONTAINER_TYPE = "io.kubernetes.cri.container-type"
SANDBOX_NAME = "io.kubernetes.cri.sandbox-name"
SANDBOX_NAMESPACE = "io.kubernetes.cri.sandbox-namespace"
CONTAINER_NAME = "io.kubernetes.cri.container-name"
GET_TIMEOUT_S = 10.0


def wrapper_script(python: str, runc: str, kubelet_root: Path, cdi_dir: Path) -> str:
    """The ``BinaryName`` script: runc as it is, except ``create`` (through :func:`main`)."""
    hook = " ".join(shlex.quote(a) for a in (
        python, "-m", "hollowscale.draplugin.runtime", "--runc", runc, "--kubelet-root", str(kubelet_root),
        "--cdi-dir", str(cdi_dir)))
    return "\n".join([
        "#!/bin/sh",
        "# Written by hollowscale.cluster.realnode for a real node with DRA GPUs: runc, with the container's",
        "# CDI devices applied at create (containerd 1.6 has no CDI; see hollowscale/draplugin/runtime.py).",
        'for arg in "$@"; do',
        '  if [ "$arg" = create ]; then',
        f'    exec {hook} -- "$@"',
        "  fi",
        "done",
        f'exec {shlex.quote(runc)} "$@"',
        "",
    ])


def parse_runc_args(args: Sequence[str]) -> tuple[Path, Path | None]:
    """(bundle dir, runc's ``--log`` file) of a ``runc [global flags] create [flags] ID`` command line."""
    log: Path | None = None
    bundle = Path.cwd()
    seen_create = False
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if not seen_create:
            if arg == "--log":
                log, i = Path(value), i + 2
                continue
            if arg.startswith("--log="):
                log = Path(arg.split("=", 1)[1])
            seen_create = arg == "create"
        elif arg in ("--bundle", "-b"):
            bundle, i = Path(value), i + 2
            continue
        elif arg.startswith("--bundle="):
            bundle = Path(arg.split("=", 1)[1])
        i += 1
    return bundle, log


def cdi_devices_of(pod_resources: Any, container: str) -> list[str]:
    """The CDI device IDs pod-resources ``Get`` lists for ``container`` (in the kubelet's order)."""
    names: list[str] = []
    for c in pod_resources.containers:
        if c.name != container:
            continue
        for dynamic in c.dynamic_resources:
            for claim_resource in dynamic.claim_resources:
                names += [d.name for d in claim_resource.cdi_devices]
    return list(dict.fromkeys(names))


def _kubelet_devices(kubelet_root: Path, namespace: str, pod: str, container: str) -> list[str]:
    import grpc

    from hollowscale.deviceplugin._generated import podresources_v1_pb2 as pr
    from hollowscale.deviceplugin._generated import podresources_v1_pb2_grpc as pr_grpc

    socket = kubelet_root / "pod-resources" / "kubelet.sock"
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        answer = pr_grpc.PodResourcesListerStub(channel).Get(
            pr.GetPodResourcesRequest(pod_name=pod, pod_namespace=namespace), timeout=GET_TIMEOUT_S)
    return cdi_devices_of(answer.pod_resources, container)


def edit_bundle(bundle: Path, kubelet_root: Path, cdi_dir: Path) -> list[str]:
    """Apply the container's CDI devices to ``bundle/config.json``; the device IDs applied."""
    from hollowscale.draplugin import cdi

    config = bundle / "config.json"
    spec: dict[str, Any] = json.loads(config.read_text())
    annotations = spec.get("annotations") or {}
    if annotations.get(CONTAINER_TYPE) != "container":
        return []
    try:
        namespace, pod, container = (annotations[k] for k in (SANDBOX_NAMESPACE, SANDBOX_NAME, CONTAINER_NAME))
    except KeyError as exc:
        raise RuntimeError(f"the container's spec lacks the CRI annotation {exc}") from None
    devices = _kubelet_devices(kubelet_root, namespace, pod, container)
    if not devices:
        return []
    cdi.apply_edits(spec, cdi.resolve(devices, cdi.load_specs(cdi_dir)))
    tmp = config.with_name(".config.json.cdi")
    tmp.write_text(json.dumps(spec))
    os.replace(tmp, config)
    return devices


def _runc_log_error(log: Path | None, message: str) -> None:
    """Say why in runc's own log format: the shim reads the last error from there into the CRI error."""
    line = json.dumps({"level": "error", "msg": message, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    if log is not None:
        try:
            with log.open("a") as f:
                f.write(line + "\n")
            return
        except OSError:
            pass
    print(message, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hollowscale.draplugin.runtime --runc R --kubelet-root K --cdi-dir D -- <runc args>``."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        split = args.index("--")
        ours, runc_args = dict(zip(args[:split:2], args[1:split:2], strict=True)), args[split + 1:]
        runc, kubelet_root, cdi_dir = ours["--runc"], Path(ours["--kubelet-root"]), Path(ours["--cdi-dir"])
    except (ValueError, KeyError) as exc:
        print(f"hollowscale.draplugin.runtime: bad arguments ({exc}); expected --runc R --kubelet-root K "
              "--cdi-dir D -- <runc arguments>", file=sys.stderr)
        return 2
    bundle, log = parse_runc_args(runc_args)
    try:
        edit_bundle(bundle, kubelet_root, cdi_dir)
    except Exception as exc:  # any failure must reach the kubelet as a failed create
        _runc_log_error(log, f"hollowscale CDI: cannot apply the container's CDI devices: {exc}")
        return 1
    os.execv(runc, [runc, *runc_args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
