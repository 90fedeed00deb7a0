"""EndpointSlice -> teacher URL translation (client model objects, no API server) and URL checks."""

from __future__ import annotations

import pytest
from kubernetes.client import (
    DiscoveryV1EndpointPort,
    V1Endpoint,
    V1EndpointConditions,
    V1EndpointSlice,
    V1ObjectMeta,
)

from distill.discovery import StaticTeachers, endpoints_from_slices, normalise_url


def _slice(name: str, port: int, eps: list[tuple[list[str], bool | None]], port_name: str = "http") -> V1EndpointSlice:
    return V1EndpointSlice(
        address_type="IPv4",
        metadata=V1ObjectMeta(name=name),
        ports=[DiscoveryV1EndpointPort(name=port_name, port=port, protocol="TCP")],
        endpoints=[V1Endpoint(addresses=addrs, conditions=V1EndpointConditions(ready=ready)) for addrs, ready in eps],
    )


def test_ready_and_unset_endpoints_count_not_ready_ones_do_not() -> None:
    slices = [
        _slice("a", 8501, [(["10.0.0.1"], True), (["10.0.0.2"], None), (["10.0.0.3"], False)]),
        _slice("b", 9000, [(["10.0.0.4"], True)]),
    ]
    assert endpoints_from_slices(slices) == {
        "http://10.0.0.1:8501",
        "http://10.0.0.2:8501",
        "http://10.0.0.4:9000",
    }


def test_port_name_selects_the_port_and_ipv6_is_bracketed() -> None:
    s = _slice("a", 8501, [(["fd00::1"], True)], port_name="metrics")
    assert endpoints_from_slices([s], port_name="http") == frozenset()
    assert endpoints_from_slices([s], port_name="metrics") == {"http://[fd00::1]:8501"}


def test_host_aliases_map_fqdn_endpoints() -> None:
    s = _slice("a", 8501, [(["teacher-a.hollowscale.test"], True), (["teacher-b.hollowscale.test"], True)])
    aliases = {"teacher-a.hollowscale.test": "127.0.0.1"}
    assert endpoints_from_slices([s], host_aliases=aliases) == {
        "http://127.0.0.1:8501",
        "http://teacher-b.hollowscale.test:8501",
    }


def test_urls_need_host_and_port() -> None:
    assert normalise_url("127.0.0.1:8501/") == "http://127.0.0.1:8501"
    for bad in ("127.0.0.1:", "127.0.0.1", "http://:80"):
        with pytest.raises(ValueError, match="host and a port"):
            normalise_url(bad)


def test_static_source_reports_changes() -> None:
    seen: list[frozenset[str]] = []
    src = StaticTeachers(["127.0.0.1:1"])
    src.start(seen.append)
    src.set(["127.0.0.1:1", "127.0.0.1:2"])
    src.stop()
    src.set([])
    assert seen == [{"http://127.0.0.1:1"}, {"http://127.0.0.1:1", "http://127.0.0.1:2"}]
