"""The teacher's input validation: every bad request maps to a 4xx with a reason."""

from __future__ import annotations

import numpy as np
import pytest

from distill import wire

LIM = wire.Limits(max_samples=8)


def test_roundtrip_uint8_and_float32() -> None:
    for dtype in (np.uint8, np.float32):
        x = (np.arange(2 * 784) % 255).astype(dtype).reshape(2, 1, 28, 28)
        body, h = wire.encode_request(x)
        got = wire.decode_binary(body, h["X-Dtype"], h["X-Shape"], LIM)
        np.testing.assert_array_equal(got, x)
    logits = np.random.default_rng(0).normal(size=(3, 10)).astype(np.float32)
    body, _ = wire.encode_logits(logits)
    np.testing.assert_array_equal(wire.decode_logits(body, 3), logits)
    with pytest.raises(ValueError):
        wire.decode_logits(body, 4)


@pytest.mark.parametrize(
    ("body", "dtype", "shape", "status", "words"),
    [
        (b"\0" * 784, "int64", "1,784", 415, "unsupported dtype"),
        (b"\0" * 783, "uint8", "1,784", 400, "body has 783 bytes"),
        (b"\0" * 700, "uint8", "1,700", 400, "wrong shape"),
        (b"\0" * 784, "uint8", "784", 400, "wrong shape"),
        (b"\0" * 784 * 9, "uint8", "9,784", 413, "oversized"),
        (b"\0" * 784, "uint8", "a,b", 400, "not a comma separated"),
        (b"\0" * 784, None, None, 400, "X-Dtype and X-Shape"),
        (np.full(784, np.nan, dtype=np.float32).tobytes(), "float32", "1,784", 400, "NaN"),
    ],
)
def test_bad_binary_requests(body: bytes, dtype: str | None, shape: str | None, status: int, words: str) -> None:
    with pytest.raises(wire.WireError) as e:
        wire.decode_binary(body, dtype, shape, LIM)
    assert e.value.status == status and words in e.value.reason


@pytest.mark.parametrize(
    ("doc", "status"),
    [([1, 2], 400), ({"x": 1}, 400), ({"inputs": [[1, 2], [3]]}, 400), ({"inputs": [[0] * 784] * 9}, 413)],
)
def test_bad_json_requests(doc: object, status: int) -> None:
    with pytest.raises(wire.WireError) as e:
        wire.decode_json(doc, LIM)
    assert e.value.status == status


def test_json_accepts_nested_shapes() -> None:
    x = wire.decode_json({"inputs": [[[0] * 28] * 28] * 2}, LIM)
    assert x.shape == (2, 1, 28, 28) and x.dtype == np.float32
