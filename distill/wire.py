"""The teacher service's wire format, shared by server and client so they cannot drift.

Binary (the default, what the reader uses): ``POST /v1/logits`` with
``Content-Type: application/octet-stream``, headers ``X-Dtype: uint8|float32`` and
``X-Shape: N,1,28,28`` (``N,28,28`` and ``N,784`` are accepted too), body = the C-order
array bytes (little-endian). 784 bytes per uint8 image. The answer is
``application/octet-stream`` float32 little-endian ``[N,10]`` logits with ``X-Shape: N,10``
(40 bytes per image).

JSON (for humans and curl): ``{"inputs": [[...784 pixel values 0..255...], ...]}`` (any
nesting whose trailing size is 784) -> ``{"logits": [[...10 floats...], ...]}``. Send
``Accept: application/json`` to get JSON logits for a binary request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from distill.data import NUM_CLASSES

PATH = "/v1/logits"
BINARY = "application/octet-stream"
JSON = "application/json"
PIXELS = 28 * 28
DTYPES: dict[str, np.dtype[Any]] = {"uint8": np.dtype("<u1"), "float32": np.dtype("<f4")}


class WireError(ValueError):
    """A malformed request. ``status`` is the HTTP code the server answers with."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    """What the server accepts. ``max_samples`` bounds one request (413 beyond it)."""

    max_samples: int = 1024


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(p) for p in text.replace(" ", "").split(",") if p != "")
    except ValueError as e:
        raise WireError(400, f"X-Shape {text!r} is not a comma separated list of integers") from e
    return shape


def check_shape(shape: tuple[int, ...], limits: Limits) -> int:
    """Validate an input shape, return N. Accepts [N,1,28,28], [N,28,28] and [N,784]."""
    if len(shape) < 2 or any(d <= 0 for d in shape):
        raise WireError(400, f"wrong shape {list(shape)}: expected [N,1,28,28], [N,28,28] or [N,784]")
    if shape[1:] not in ((1, 28, 28), (28, 28), (PIXELS,)):
        raise WireError(400, f"wrong shape {list(shape)}: each sample must be 1x28x28 (784 pixels)")
    n = shape[0]
    if n > limits.max_samples:
        raise WireError(413, f"oversized request: {n} samples, this teacher accepts at most {limits.max_samples}")
    return n


def decode_binary(body: bytes, dtype_name: str | None, shape_text: str | None, limits: Limits) -> np.ndarray:
    """Body bytes -> array [N,1,28,28] (uint8 or float32); raises :class:`WireError`."""
    if dtype_name is None or shape_text is None:
        raise WireError(400, "binary requests need X-Dtype and X-Shape headers")
    dtype = DTYPES.get(dtype_name.strip().lower())
    if dtype is None:
        raise WireError(415, f"unsupported dtype {dtype_name!r}: use one of {sorted(DTYPES)}")
    n = check_shape(parse_shape(shape_text), limits)
    expected = n * PIXELS * dtype.itemsize
    if len(body) != expected:
        raise WireError(400, f"body has {len(body)} bytes, X-Shape/X-Dtype imply {expected}")
    arr = np.frombuffer(body, dtype=dtype).reshape(n, 1, 28, 28)
    if dtype.kind == "f" and not np.isfinite(arr).all():
        raise WireError(400, "input contains NaN or infinite values")
    return arr


def decode_json(doc: object, limits: Limits) -> np.ndarray:
    """``{"inputs": nested numbers}`` -> float32 array [N,1,28,28]; raises :class:`WireError`."""
    if not isinstance(doc, dict) or "inputs" not in doc:
        raise WireError(400, 'JSON body must be an object with an "inputs" array')
    try:
        arr = np.asarray(doc["inputs"], dtype=np.float32)
    except (ValueError, TypeError) as e:
        raise WireError(400, f"inputs is not a rectangular array of numbers: {e}") from e
    if arr.ndim < 2:
        raise WireError(400, f"wrong shape {list(arr.shape)}: expected [N,1,28,28], [N,28,28] or [N,784]")
    n = check_shape(tuple(int(d) for d in arr.shape), limits)
    if not np.isfinite(arr).all():
        raise WireError(400, "input contains NaN or infinite values")
    return arr.reshape(n, 1, 28, 28)


def encode_request(x: np.ndarray) -> tuple[bytes, dict[str, str]]:
    """Client side: array [N,1,28,28] uint8/float32 -> (body, headers)."""
    name = {np.dtype("uint8"): "uint8", np.dtype("float32"): "float32"}.get(x.dtype)
    if name is None:
        raise TypeError(f"cannot send dtype {x.dtype}")
    x = np.ascontiguousarray(x).astype(DTYPES[name], copy=False)
    return x.tobytes(), {
        "Content-Type": BINARY,
        "X-Dtype": name,
        "X-Shape": ",".join(str(d) for d in x.shape),
    }


def encode_logits(logits: np.ndarray) -> tuple[bytes, dict[str, str]]:
    """Server side: float logits [N,10] -> (body, headers)."""
    out = np.ascontiguousarray(logits, dtype="<f4")
    return out.tobytes(), {"X-Shape": f"{out.shape[0]},{out.shape[1]}", "X-Dtype": "float32"}


def decode_logits(body: bytes, expected_n: int) -> np.ndarray:
    """Client side: response body -> float32 [N,10]; checks the count matches the request."""
    arr = np.frombuffer(body, dtype="<f4")
    if arr.size != expected_n * NUM_CLASSES:
        raise ValueError(f"teacher answered {arr.size} floats, expected {expected_n}x{NUM_CLASSES}")
    return arr.reshape(expected_n, NUM_CLASSES)
