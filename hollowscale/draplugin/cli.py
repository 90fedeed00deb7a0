"""``python -m hollowscale.draplugin``: one process per real node, until SIGTERM.

    python -m hollowscale.draplugin --kubelet-root DIR --node NAME --kubeconfig FILE --fake-gpus N
        [--gpu-model h100-80gb] [--sharing none|memory] [--partitions 1g.10gb,3g.40gb] [--cdi-dir DIR]
    python -m hollowscale.draplugin --kubelet-root DIR --node NAME --kubeconfig FILE [--real] [--sharing memory]

A fake inventory is a hollow pool's node with ``gpus: {expose: dra, model, sharing, partitions}``
(:class:`hollow.dra.GpuSpec`); without ``--fake-gpus`` the machine's real GPUs are used (``--real`` makes
that explicit).  ``--kubeconfig`` is the node's own (the kubelet's): the plugin reads claims and writes the
node's ResourceSlices with it.  ``--print-slices`` prints the slices the inventory makes (node UID ``<uid>``)
and exits.  Exit status: 0 after SIGTERM/SIGINT (sockets removed), 1 when the plugin cannot start, 2 for
bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from hollow.dra import DRIVER, GPU_MODELS, SHARING, GpuSpec
from hollowscale.deviceplugin.allocation import find_driver_files
from hollowscale.deviceplugin.inventory import nvidia_smi_path
from hollowscale.draplugin.api import Api
from hollowscale.draplugin.checkpoint import CheckpointError
from hollowscale.draplugin.inventory import DraInventory, InventoryError, fake_inventory, real_inventory
from hollowscale.draplugin.publisher import SlicePublisher
from hollowscale.draplugin.server import DraPluginServer, Driver, PluginError, PluginSettings
from hollowscale.draplugin.slices import wanted_slices
from kubecore.config import KubeconfigError
from kubecore.schema import SpecError, validate

log = logging.getLogger("hollowscale.draplugin")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of GPUs, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 GPU, got {value}")
    return value


def _profiles(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hollowscale.draplugin",
        description=f"Kubelet DRA plugin for {DRIVER} GPUs (fake inventory or the machine's real GPUs): registers "
                    "through the kubelet's plugin watcher, publishes the node's ResourceSlices, prepares claims "
                    "(CDI specs).")
    parser.add_argument("--kubelet-root", type=Path, required=True, help="the kubelet's --root-dir")
    parser.add_argument("--node", required=True, help="the node's name (its pool; fake UUIDs derive from it)")
    parser.add_argument("--kubeconfig", type=Path, help="the node's kubeconfig (required unless --print-slices)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fake-gpus", type=_positive_int, metavar="N", help="offer N fake GPUs")
    mode.add_argument("--real", action="store_true",
                      help="offer the machine's GPUs (nvidia-smi); the default when --fake-gpus is not given")
    parser.add_argument("--gpu-model", choices=sorted(GPU_MODELS),
                        help="fake GPUs' model (default h100-80gb, the hollow pools' catalogue); only with --fake-gpus")
    parser.add_argument("--sharing", choices=SHARING, default="none",
                        help="memory: publish memory as consumable capacity (claims share a GPU by memory)")
    parser.add_argument("--partitions", type=_profiles, default=(), metavar="PROFILES",
                        help="fake GPUs' MIG profiles published as partitionable devices (comma-separated, "
                             "e.g. 1g.10gb,3g.40gb); only with --fake-gpus")
    parser.add_argument("--cdi-dir", type=Path, default=Path("/var/run/cdi"),
                        help="where CDI spec files go (default /var/run/cdi)")
    parser.add_argument("--resync", type=float, default=5.0, metavar="SECONDS",
                        help="how often the published slices are checked (default 5 s)")
    parser.add_argument("--print-slices", action="store_true", help="print the node's ResourceSlices and exit")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


def resolve_inventory(args: argparse.Namespace) -> DraInventory:
    if args.fake_gpus is not None:
        doc = {"expose": "dra", "model": args.gpu_model or "h100-80gb", "sharing": args.sharing,
               "partitions": list(args.partitions)}
        try:
            spec = validate(GpuSpec, doc, "fake GPUs")
        except SpecError as exc:
            raise InventoryError(str(exc)) from None
        return fake_inventory(args.node, args.fake_gpus, spec)
    if not args.real and nvidia_smi_path() is None:
        raise InventoryError("no NVIDIA GPU found on this machine (nvidia-smi missing); pass --fake-gpus N for a "
                             "fake inventory")
    return real_inventory(memory_shares=args.sharing == "memory")


def serve(args: argparse.Namespace, inventory: DraInventory, stop: threading.Event) -> None:
    """Run the plugin until ``stop`` is set; always removes its sockets."""
    settings = PluginSettings(kubelet_root=args.kubelet_root.absolute(), node=args.node,
                              cdi_dir=args.cdi_dir.absolute())
    api = Api.from_kubeconfig(args.kubeconfig)
    driver_files = find_driver_files(inventory.gpus.dev_root) if inventory.real else None
    driver = Driver(settings, inventory, api.claim, driver_files)
    publisher = SlicePublisher(api, inventory, args.node, interval_s=args.resync)
    server = DraPluginServer(settings, driver, on_registered=publisher.enable)
    publisher.start()
    try:
        server.start()
        while not stop.wait(1.0):  # a timed wait: the signal handler runs between waits at the latest
            pass
    finally:
        server.stop()
        publisher.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.gpu_model is not None or args.partitions) and args.fake_gpus is None:
        parser.error("--gpu-model and --partitions apply to --fake-gpus only (real GPUs report their own)")
    if args.kubeconfig is None and not args.print_slices:
        parser.error("--kubeconfig is required (the node's: the plugin reads claims and publishes the slice)")
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format=f"%(asctime)s draplugin[{args.node}] %(levelname)s %(message)s")
    try:
        inventory = resolve_inventory(args)
    except InventoryError as exc:
        print(f"draplugin: error: {exc}", file=sys.stderr)
        return 1
    if args.print_slices:
        print(json.dumps(wanted_slices(inventory, args.node, "<uid>"), indent=2))
        return 0

    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("got %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        serve(args, inventory, stop)
    except (PluginError, CheckpointError, KubeconfigError) as exc:
        print(f"draplugin: error: {exc}", file=sys.stderr)
        return 1
    return 0
