"""Where kube-apiserver's CPU goes: its own pprof CPU profile, read into a few named rows.

Shared by the benches that explain a CPU figure of the apiserver (``bench_hollow``: CPU per heartbeat
write; ``bench_dra``: CPU per ResourceSlice).  The apiserver serves ``/debug/pprof/profile`` by default
(``--profiling``); ``go tool pprof -top -cum`` gives each function's inclusive samples, and a row is the
largest inclusive share of a function matching its pattern.  Rows overlap where one calls another (etcd
calls are made inside the create and update paths).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from typing import Any

from hollowscale.cluster.binaries import BuildError, go_binary

#: (key, label, pattern of the function's full name in ``go tool pprof -top -cum``)
Row = tuple[str, str, str]

#: the rows of a heartbeat (update) workload
UPDATE_ROWS: tuple[Row, ...] = (
    ("update_path", "update path (registry Store.Update, etcd included)", r"registry\.\(\*Store\)\.Update$"),
    ("x509_auth", "client certificate check per request (x509 chain verify)",
     r"x509\.\(\*Authenticator\)\.AuthenticateRequest$"),
    ("managed_fields", "managed fields tracking (FieldManager.Update)",
     r"managedfields/internal\.\(\*FieldManager\)\.Update$"),
    ("managed_fields_admit", "managed fields admission (Admit)", r"managedFieldsValidatingAdmissionController\)\.Admit$"),
    ("managed_fields_validate", "managed fields admission (Validate)",
     r"managedFieldsValidatingAdmissionController\)\.Validate$"),
    ("etcd_client", "etcd client (gRPC Invoke)", r"grpc\.\(\*ClientConn\)\.Invoke$"),
    ("decode", "request body decode (codec Decode)", r"versioning\.\(\*codec\)\.Decode$"),
    ("encode", "object encode (codec Encode)", r"versioning\.\(\*codec\)\.Encode$"),
    ("watch", "watch serving (WatchServer)", r"\(\*WatchServer\)\.HandleHTTP$"),
    ("gc", "garbage collection (background mark)", r"runtime\.gcBgMarkWorker$"),
)

_TOTAL = re.compile(r"of ([0-9.]+)(ms|s|mins|hrs) total")
_UNIT_S = {"ms": 0.001, "s": 1.0, "mins": 60.0, "hrs": 3600.0}


def cum_shares(top_cum: str, rows: Iterable[Row] = UPDATE_ROWS) -> dict[str, float]:
    """Per row key, the largest inclusive % (``cum%``) of a function matching the row's pattern in
    ``go tool pprof -top -cum`` text (0.0 when none matches)."""
    rows = tuple(rows)
    out: dict[str, float] = {key: 0.0 for key, _, _ in rows}
    compiled = [(key, re.compile(rx)) for key, _, rx in rows]
    for line in top_cum.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[4].endswith("%"):
            continue
        try:
            cum = float(parts[4].rstrip("%"))
        except ValueError:
            continue
        for label, rx in compiled:
            if rx.search(parts[5].strip()):
                out[label] = max(out[label], round(cum, 1))
    return out


def total_sample_s(top_cum: str) -> float | None:
    """The profile's CPU seconds in all (the ``of N total`` of pprof's header), or None if absent."""
    m = _TOTAL.search(top_cum)
    return round(float(m.group(1)) * _UNIT_S[m.group(2)], 2) if m else None


_SHOWING = re.compile(r"Showing nodes accounting for ([0-9.]+)(ms|s|mins|hrs)?,")


def _go_pprof(path: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([go_binary(), "tool", "pprof", "-top", "-nodecount=100000", *flags, path],
                          capture_output=True, text=True, timeout=120)


def _pprof_top(path: str | None, *flags: str) -> subprocess.CompletedProcess[str] | dict[str, Any]:
    """``go tool pprof -top`` of a saved profile, or the why-none record a summary returns instead."""
    if not path:
        return {"note": "no apiserver profile"}
    try:
        proc = _go_pprof(path, *flags)
    except BuildError:
        return {"file": path, "note": "go not found: profile kept, not summarised"}
    if proc.returncode != 0:
        return {"file": path, "note": f"go tool pprof failed: {proc.stderr.strip()[-300:]}"}
    return proc


def focus_cpu(path: str | None, rows: Iterable[Row]) -> dict[str, Any]:
    """Per row, the profile's CPU seconds in samples whose stack has a function matching the row's pattern
    (``go tool pprof -focus``), and the profile's CPU seconds in all; or why none.

    Why not :func:`cum_shares`: the apiserver serves a request on more than one goroutine (the handler,
    and the finisher that runs the storage call), so no one function's inclusive time is the request's;
    a focus on the handler's package-qualified name takes the samples of all of its goroutines."""
    whole = _pprof_top(path)
    if isinstance(whole, dict):
        return whole
    assert path is not None
    cpu: dict[str, float] = {}
    for key, _, rx in rows:
        m = _SHOWING.search(_go_pprof(path, f"-focus={rx}").stdout)
        cpu[key] = round(float(m.group(1)) * _UNIT_S[m.group(2) or "s"], 2) if m else 0.0
    return {"file": path, "sample_s": total_sample_s(whole.stdout), "cpu_s": cpu}


def summarise(path: str | None, rows: Iterable[Row] = UPDATE_ROWS) -> dict[str, Any]:
    """The rows' shares of a saved profile (``go tool pprof``) and its CPU seconds, or why none."""
    proc = _pprof_top(path, "-cum")
    if isinstance(proc, dict):
        return proc
    return {"file": path, "shares": cum_shares(proc.stdout, rows), "sample_s": total_sample_s(proc.stdout)}
