"""Pod IPs from each node's pod CIDR.

Addresses are handed out lowest-free-first and returned when a pod ends, like a CNI's host-local IPAM;
after a restart the agent re-claims the addresses it sees on running pods so it never hands one out
twice.
"""

from __future__ import annotations

import ipaddress


class PodIPs:
    """Address book of one node's pod CIDR (network, gateway .1 and broadcast are never handed out)."""

    def __init__(self, cidr: str) -> None:
        net = ipaddress.IPv4Network(cidr)
        self._base = int(net.network_address)
        self._size = net.num_addresses
        self._next = 2
        self._free: list[int] = []
        self._by_uid: dict[str, int] = {}
        self._used: set[int] = set()

    def __len__(self) -> int:
        return len(self._by_uid)

    def allocate(self, uid: str) -> str | None:
        """The address of pod ``uid`` (the same one if it already has one); None when the CIDR is full."""
        if uid in self._by_uid:
            return str(ipaddress.IPv4Address(self._base + self._by_uid[uid]))
        while self._free:
            off = self._free.pop()
            if off not in self._used:
                break
        else:
            while self._next < self._size - 1 and self._next in self._used:
                self._next += 1
            if self._next >= self._size - 1:
                return None
            off = self._next
            self._next += 1
        self._used.add(off)
        self._by_uid[uid] = off
        return str(ipaddress.IPv4Address(self._base + off))

    def claim(self, uid: str, ip: str) -> bool:
        """Record that pod ``uid`` already holds ``ip`` (seen on a running pod); False if outside the CIDR."""
        off = int(ipaddress.IPv4Address(ip)) - self._base
        if not 0 < off < self._size - 1 or uid in self._by_uid:
            return False
        self._used.add(off)
        self._by_uid[uid] = off
        return True

    def release(self, uid: str) -> None:
        """Return pod ``uid``'s address, if it had one."""
        off = self._by_uid.pop(uid, None)
        if off is not None:
            self._used.discard(off)
            self._free.append(off)
