"""The agent's hand-written protobuf for Leases: what it writes, and what it reads back."""

from __future__ import annotations

import pytest

from hollow import protobuf
from hollow.api import Response, _retry_after
from hollow.clock import rfc3339_micro


def _message(buf: bytes) -> dict[int, list[int | bytes]]:
    out: dict[int, list[int | bytes]] = {}
    for number, value in protobuf.fields(buf):
        out.setdefault(number, []).append(value)
    return out


def test_varint_matches_the_protobuf_examples() -> None:
    assert protobuf.varint(0) == b"\x00"
    assert protobuf.varint(1) == b"\x01"
    assert protobuf.varint(150) == b"\x96\x01"  # the example of the protobuf encoding guide
    assert protobuf.varint(300) == b"\xac\x02"


def test_lease_update_carries_every_field_of_the_json_update() -> None:
    body = protobuf.lease("n-1", "kube-node-lease", "uid-9", 40, 1_700_000_000.123456, "4711")
    assert body.startswith(protobuf.MAGIC)
    unknown = _message(body[4:])
    type_meta = _message(unknown[1][0])  # type: ignore[arg-type]
    assert type_meta == {1: [b"coordination.k8s.io/v1"], 2: [b"Lease"]}
    lease = _message(unknown[2][0])  # type: ignore[arg-type]
    meta = _message(lease[1][0])  # type: ignore[arg-type]
    assert meta[1] == [b"n-1"] and meta[3] == [b"kube-node-lease"] and meta[6] == [b"4711"]
    owner = _message(meta[13][0])  # type: ignore[arg-type]
    assert owner == {1: [b"Node"], 3: [b"n-1"], 4: [b"uid-9"], 5: [b"v1"]}
    spec = _message(lease[2][0])  # type: ignore[arg-type]
    assert spec[1] == [b"n-1"] and spec[2] == [40]
    renew = _message(spec[4][0])  # type: ignore[arg-type]
    assert renew == {1: [1_700_000_000], 2: [int((1_700_000_000.123456 - 1_700_000_000) * 1e6) * 1000]}


def test_lease_create_has_no_resource_version() -> None:
    meta = _message(_message(_message(protobuf.lease("n", "ns", "u", 40, 5.0)[4:])[2][0])[1][0])  # type: ignore[arg-type]
    assert 6 not in meta


def test_micro_time_says_what_the_json_form_says() -> None:
    for wall in (1_700_000_000.123456, 1_800_000_000.654321, 1.000001, 12.5):
        fields = _message(protobuf.micro_time(wall))
        micros = fields.get(2, [0])[0] // 1000  # type: ignore[operator]
        assert rfc3339_micro(wall).endswith(f".{micros:06d}Z")


def test_micro_time_on_a_whole_second_leaves_nanos_out() -> None:
    assert _message(protobuf.micro_time(12.0)) == {1: [12]}
    assert _message(protobuf.micro_time(12.9999996)) == {1: [12], 2: [999_999_000]}  # cut, as the JSON form


def _answer(raw: bytes, kind: bytes = b"Lease") -> bytes:
    tm = protobuf.field_bytes(1, b"coordination.k8s.io/v1") + protobuf.field_bytes(2, kind)
    return protobuf.MAGIC + protobuf.field_bytes(1, tm) + protobuf.field_bytes(2, raw) + protobuf.field_bytes(4, b"")


def test_resource_version_of_a_protobuf_answer() -> None:
    meta = protobuf.field_bytes(1, b"n") + protobuf.field_bytes(5, b"uid") + protobuf.field_bytes(6, b"99") + \
        protobuf.field_int(7, 3)
    body = _answer(protobuf.field_bytes(1, meta) + protobuf.field_bytes(2, b""))
    assert protobuf.resource_version(body) == "99"
    assert Response(200, body).resource_version() == "99"
    assert protobuf.resource_version(b'{"metadata":{"resourceVersion":"5"}}') is None
    assert Response(200, b'{"metadata":{"resourceVersion":"5"}}').resource_version() == "5"


def test_status_message_and_retry_after_of_a_protobuf_status() -> None:
    details = protobuf.field_bytes(1, b"n") + protobuf.field_int(5, 7)
    status = (protobuf.field_bytes(2, b"Failure") + protobuf.field_bytes(3, b"the object has been modified")
              + protobuf.field_bytes(4, b"Conflict") + protobuf.field_bytes(5, details) + protobuf.field_int(6, 409))
    body = _answer(status, b"Status")
    assert Response(409, body).message() == "the object has been modified"
    assert protobuf.status_retry_after(body) == 7 and _retry_after(body) == 7.0
    assert _retry_after(_answer(protobuf.field_bytes(3, b"slow down"), b"Status")) is None
    assert _retry_after(b'{"details":{"retryAfterSeconds":2}}') == 2.0


def test_malformed_bytes_are_refused_not_misread() -> None:
    with pytest.raises(ValueError):
        list(protobuf.fields(b"\x0a\x05ab"))  # a 5-byte string with 2 bytes left
    with pytest.raises(ValueError):
        list(protobuf.fields(b"\x80"))  # a varint that never ends
    assert protobuf.resource_version(protobuf.MAGIC + b"\x12\x09abc") == ""  # broken: no version, no exception
    assert Response(500, protobuf.MAGIC + b"\xff").message()  # falls back to an excerpt
