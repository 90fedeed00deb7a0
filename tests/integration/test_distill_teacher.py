"""The teacher service as a real subprocess: answers, batching, bad input, clean shutdown."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from distill import wire
from distill.models import ConvNet, NetConfig, load_checkpoint, save_checkpoint
from distill.procs import TeacherProcess

TINY = NetConfig(channels=(4, 8), convs_per_stage=1, hidden=16)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    p = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    save_checkpoint(ConvNet(TINY), p, {"test_accuracy": None})
    return p


@pytest.fixture(scope="module")
def teacher(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeacherProcess]:
    t = TeacherProcess(
        checkpoint, tmp_path_factory.mktemp("teacher"), "t", extra_args=["--max-wait-ms", "30", "--max-request", "64"]
    )
    t.start()
    t.wait_ready(120)
    yield t
    t.stop()


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    req = urllib.request.Request(url + wire.PATH, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_health_readiness_and_metrics(teacher: TeacherProcess) -> None:
    assert get(teacher.url + "/healthz")[0] == 200
    assert get(teacher.url + "/readyz")[0] == 200
    code, text = get(teacher.url + "/metrics")
    assert code == 200
    for series in (
        "teacher_requests_total",
        "teacher_batch_size_bucket",
        "teacher_request_latency_seconds_bucket",
        "teacher_queue_depth_samples",
    ):
        assert series in text


def test_logits_match_the_model_in_binary_and_json(teacher: TeacherProcess, checkpoint: Path) -> None:
    net = load_checkpoint(checkpoint).build()
    x = np.random.default_rng(1).integers(0, 256, (5, 1, 28, 28), dtype=np.uint8)
    with torch.inference_mode():
        expected = net(torch.from_numpy(x)).numpy()
    body, headers = wire.encode_request(x)
    code, out, h = post(teacher.url, body, headers)
    assert code == 200 and h["X-Shape"] == "5,10"
    np.testing.assert_allclose(wire.decode_logits(out, 5), expected, rtol=1e-4, atol=1e-5)
    code, out, _ = post(
        teacher.url, json.dumps({"inputs": x.reshape(5, 784).tolist()}).encode(), {"Content-Type": wire.JSON}
    )
    assert code == 200
    np.testing.assert_allclose(np.array(json.loads(out)["logits"]), expected, rtol=1e-4, atol=1e-5)


def _raw_post(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One HTTP/1.1 POST to the teacher as bytes, closing the connection after the answer."""
    host = urllib.parse.urlsplit(url).netloc
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (f"POST {wire.PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n{head}"
            "Connection: close\r\n\r\n").encode() + body


def test_concurrent_requests_are_batched(teacher: TeacherProcess) -> None:
    before = teacher.metrics()
    x = np.zeros((4, 1, 28, 28), dtype=np.uint8)
    body, headers = wire.encode_request(x)
    request = _raw_post(teacher.url, body, headers)
    address = urllib.parse.urlsplit(teacher.url)
    # Concurrent for certain, however loaded the machine: all 32 requests are in the kernel's socket
    # buffers (connected through the listen backlog, sent) while the teacher is stopped, then it goes on.
    assert teacher.proc is not None
    teacher.proc.send_signal(signal.SIGSTOP)
    try:
        socks = [socket.create_connection((address.hostname, address.port), timeout=30) for _ in range(32)]
        for sock in socks:
            sock.sendall(request)
    finally:
        teacher.proc.send_signal(signal.SIGCONT)
    codes = []
    for sock in socks:
        with sock, sock.makefile("rb") as answer:
            codes.append(int(answer.readline().split()[1]))
            answer.read()
    assert codes == [200] * 32
    after = teacher.metrics()
    batches = after["teacher_batch_size_count"] - before.get("teacher_batch_size_count", 0)
    samples = after["teacher_samples_total"] - before.get("teacher_samples_total", 0)
    assert samples == 128
    assert batches < 32, f"32 concurrent requests took {batches} forward passes: no batching"


@pytest.mark.parametrize(
    ("body", "headers", "status", "words"),
    [
        (b"\0" * 784, {"Content-Type": wire.BINARY, "X-Dtype": "float64", "X-Shape": "1,784"}, 415, "dtype"),
        (b"\0" * 700, {"Content-Type": wire.BINARY, "X-Dtype": "uint8", "X-Shape": "1,700"}, 400, "wrong shape"),
        (b"\0" * 784 * 65, {"Content-Type": wire.BINARY, "X-Dtype": "uint8", "X-Shape": "65,784"}, 413, "oversized"),
        (b"\0" * 40_000_000, {"Content-Type": wire.BINARY, "X-Dtype": "uint8", "X-Shape": "1,784"}, 413, "oversized"),
        (b"\0" * 100, {"Content-Type": wire.BINARY, "X-Dtype": "uint8", "X-Shape": "1,784"}, 400, "bytes"),
        (b"{not json", {"Content-Type": wire.JSON}, 400, "invalid JSON"),
        (b'{"inputs": [[1, 2]]}', {"Content-Type": wire.JSON}, 400, "wrong shape"),
        (b"hello", {"Content-Type": "text/plain"}, 415, "Content-Type"),
    ],
)
def test_bad_input_gets_4xx_with_a_reason_and_never_kills_the_teacher(
    teacher: TeacherProcess, body: bytes, headers: dict[str, str], status: int, words: str
) -> None:
    code, out, _ = post(teacher.url, body, headers)
    assert code == status
    assert words in json.loads(out)["error"]
    ok, _, _ = post(teacher.url, *wire.encode_request(np.zeros((1, 1, 28, 28), dtype=np.uint8)))
    assert ok == 200
    assert teacher.proc is not None and teacher.proc.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_drains_in_flight_requests_and_exits_zero(checkpoint: Path, tmp_path: Path, sig: int) -> None:
    t = TeacherProcess(checkpoint, tmp_path, "drain", extra_args=["--max-wait-ms", "1500"])
    t.start()
    t.wait_ready(120)
    result: dict[str, int] = {}

    def call() -> None:
        result["code"] = post(t.url, *wire.encode_request(np.zeros((2, 1, 28, 28), dtype=np.uint8)))[0]

    th = threading.Thread(target=call)
    th.start()
    time.sleep(0.5)  # the request now waits in the batching window
    assert t.proc is not None
    t.proc.send_signal(sig)
    th.join(30)
    assert result.get("code") == 200
    assert t.proc.wait(timeout=30) == 0
    assert "teacher stopped" in (tmp_path / "drain.log").read_text()
