"""``python -m hollowscale.deviceplugin``: one process per real node that has GPUs, until SIGTERM.

    python -m hollowscale.deviceplugin --kubelet-root DIR --node NAME --fake-gpus N [--gpu-model MODEL]
    python -m hollowscale.deviceplugin --kubelet-root DIR --node NAME [--real]

Without ``--fake-gpus`` the machine's real GPUs are used (``--real`` makes that explicit and an error when
there are none).  ``--print-node-labels`` prints the ``--node-labels`` value the kubelet should get for
this inventory (``nvidia.com/gpu.product=...,nvidia.com/gpu.count=N``) and exits: a device plugin cannot
label its node.  Exit status: 0 after SIGTERM/SIGINT (socket removed), 1 when the plugin cannot start,
2 for bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from hollowscale.deviceplugin.allocation import find_driver_files
from hollowscale.deviceplugin.health import HealthWatcher, probe_real
from hollowscale.deviceplugin.inventory import Inventory, InventoryError, detect_real, fake_inventory, real_inventory
from hollowscale.deviceplugin.server import PluginError, PluginServer, PluginSettings

DEFAULT_FAKE_MODEL = "Tesla-V100-SXM2-32GB"  # the hollow pools' example model (hollow/pools.py)
log = logging.getLogger("hollowscale.deviceplugin")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of GPUs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 GPU, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hollowscale.deviceplugin",
        description="Kubelet device plugin for nvidia.com/gpu (fake inventory or the machine's real GPUs), "
                    "registered through the kubelet's plugin watcher (<kubelet-root>/plugins_registry).")
    parser.add_argument("--kubelet-root", type=Path, required=True, help="the kubelet's --root-dir")
    parser.add_argument("--kubelet-sees-root", type=Path, metavar="DIR",
                        help="the kubelet's --root-dir as the kubelet sees it, when it runs in another mount "
                             "namespace (a kind node container with <kubelet-root>/plugins_registry mounted into "
                             "<DIR>/plugins_registry); default: --kubelet-root")
    parser.add_argument("--node", required=True, help="the node's name (fake device IDs are <node>-gpu-<i>)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fake-gpus", type=_positive_int, metavar="N", help="advertise N fake GPUs")
    mode.add_argument("--real", action="store_true",
                      help="advertise the machine's GPUs (nvidia-smi); the default when --fake-gpus is not given")
    parser.add_argument("--gpu-model", metavar="MODEL",
                        help=f"fake GPUs' model, label form (default {DEFAULT_FAKE_MODEL}); only with --fake-gpus")
    parser.add_argument("--resource", default="nvidia.com/gpu", help="extended resource name (default nvidia.com/gpu)")
    parser.add_argument("--health-file", type=Path, metavar="PATH",
                        help="device IDs listed here (one a line) are reported Unhealthy; re-read every interval")
    parser.add_argument("--health-interval", type=_positive_float, default=1.0, metavar="SECONDS",
                        help="how often the health file is read (default 1 s; real GPUs are probed every 10 s)")
    parser.add_argument("--print-node-labels", action="store_true",
                        help="print the kubelet --node-labels value for this inventory and exit")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def resolve_inventory(args: argparse.Namespace) -> Inventory:
    """Fake when asked, else the real GPUs; :class:`InventoryError` says why neither is possible."""
    if args.fake_gpus is not None:
        return fake_inventory(args.node, args.fake_gpus, args.gpu_model or DEFAULT_FAKE_MODEL)
    if args.real:
        return real_inventory()
    found = detect_real()
    if found is None:
        raise InventoryError("no NVIDIA GPU found on this machine (nvidia-smi missing or listing none); "
                             "pass --fake-gpus N for a fake inventory")
    return found


def serve(args: argparse.Namespace, inventory: Inventory, stop: threading.Event) -> None:
    """Run the plugin until ``stop`` is set; always removes the socket."""
    settings = PluginSettings(kubelet_root=args.kubelet_root.absolute(), node=args.node, resource=args.resource,
                              kubelet_view=args.kubelet_sees_root)
    driver = find_driver_files(inventory.dev_root) if inventory.real else None
    if driver is not None:
        log.info("driver files: devices %s, libraries %s, nvidia-smi %s", list(driver.control_devices),
                 sorted(driver.libraries), driver.nvidia_smi)
        missing = [f"/dev/nvidia{g.minor}" for g in inventory.gpus
                   if g.minor is not None and not (inventory.dev_root / f"nvidia{g.minor}").exists()]
        if missing:  # containers given these would fail to start (the runtime cannot create the node)
            log.warning("device files missing on this host: %s (is the NVIDIA driver loaded?)", missing)
    server = PluginServer(settings, inventory, driver)
    watcher = HealthWatcher(server.state, args.health_interval, args.health_file,
                            probe_real if inventory.real else None)
    watcher.start()
    try:
        server.start()
        while not stop.wait(1.0):  # a timed wait: the signal handler runs between waits at the latest
            pass
    finally:
        watcher.stop()
        server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.gpu_model is not None and args.fake_gpus is None:
        parser.error("--gpu-model applies to --fake-gpus only (real GPUs report their own model)")
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format=f"%(asctime)s deviceplugin[{args.node}] %(levelname)s %(message)s")
    try:
        inventory = resolve_inventory(args)
    except InventoryError as exc:
        print(f"deviceplugin: error: {exc}", file=sys.stderr)
        return 1
    if args.print_node_labels:
        print(",".join(f"{k}={v}" for k, v in inventory.node_labels().items()))
        return 0

    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("got %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        serve(args, inventory, stop)
    except PluginError as exc:
        print(f"deviceplugin: error: {exc}", file=sys.stderr)
        return 1
    return 0
