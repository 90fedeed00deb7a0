"""Keeps the node's ResourceSlices published while the plugin is registered.

The kubelet deletes every ResourceSlice of its node when it starts (before any plugin is registered, but
in the background and with retries, so possibly after this plugin published) and a driver's slices
``wipingDelay`` after its plugin unregistered (``pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go``).  So
the slices are published when the kubelet reports the registration, and checked every ``interval_s``
after that: made again when gone, updated when they differ (another inventory, a Node made again); a slice
of this driver and node that is not one of them is deleted (a pool must not be published twice).
"""

from __future__ import annotations

import logging
import threading

from hollow.dra import DRIVER
from hollowscale.draplugin.api import Api, ApiError
from hollowscale.draplugin.inventory import DraInventory
from hollowscale.draplugin.slices import same_content, wanted_slices

log = logging.getLogger("hollowscale.draplugin")


class SlicePublisher:
    """One thread; :meth:`enable` (on registration) starts publishing, :meth:`stop` ends the thread."""

    def __init__(self, api: Api, inventory: DraInventory, node: str, *, interval_s: float = 5.0) -> None:
        self.api = api
        self.inventory = inventory
        self.node = node
        self.driver = DRIVER
        self.interval_s = interval_s
        self.published = threading.Event()  #: set once the slice is known to be there as wanted
        self._enabled = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last = ""

    def reconcile(self) -> str:
        """Make the published slices what they should be: ``created``, ``updated``, ``unchanged``, or
        ``no node`` (the Node is not there yet)."""
        node = self.api.node(self.node)
        if node is None:
            return "no node"
        wanted = {s["metadata"]["name"]: s for s in wanted_slices(self.inventory, self.node, node["metadata"]["uid"])}
        published = {s["metadata"]["name"]: s for s in self.api.node_slices(self.node, self.driver)}
        for name in sorted(set(published) - set(wanted)):
            self.api.delete_slice(name)
            log.info("deleted ResourceSlice %s (not one of this plugin's)", name)
        done = set()
        for name, want in wanted.items():
            got = published.get(name)
            if got is None:
                self.api.create_slice(want)
                done.add("created")
            elif not same_content(got, want):
                want["metadata"]["resourceVersion"] = got["metadata"]["resourceVersion"]
                want["spec"]["pool"]["generation"] = int(got["spec"]["pool"].get("generation", 0)) + 1
                self.api.update_slice(want)
                done.add("updated")
        return "created" if "created" in done else "updated" if done else "unchanged"

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            if not self._enabled.is_set():
                continue
            try:
                what = self.reconcile()
            except ApiError as exc:
                self.published.clear()
                what = f"failed: {exc}"
            if what in ("created", "updated", "unchanged"):
                self.published.set()
            if what != "unchanged" and what != self._last:
                log.info("ResourceSlices of %s: %s (%d device(s))", self.node, what, len(self.inventory.devices))
            elif what in ("created", "updated"):
                log.info("ResourceSlices of %s: %s again", self.node, what)
            self._last = what

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="slice-publisher", daemon=True)
        self._thread.start()

    def enable(self) -> None:
        """The kubelet registered the plugin: publish now, and keep the slice there."""
        self._enabled.set()
        self._wake.set()

    def disable(self) -> None:
        self._enabled.clear()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 15)
            self._thread = None
