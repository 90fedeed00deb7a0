"""The ground floor: quantities, kubeconfig loading, durations, distributions, strict YAML, schema, metrics text."""

from __future__ import annotations

import base64
import math
import os
import random
import stat
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kubecore.config import KubeconfigError, load_endpoint
from kubecore.distributions import DIST_NAMES, DistError, DurationDist, parse_dist
from kubecore.durations import format_go_duration, parse_go_duration, to_seconds
from kubecore.procs import read_announced, spawn, stop_group
from kubecore.promtext import parse_samples, total
from kubecore.quantity import format_quantity, parse_quantity
from kubecore.schema import Dist, Seconds, Spec, SpecError, number, one_of, validate
from kubecore.yamlfile import load_yaml, parse_yaml


@pytest.mark.parametrize(("text", "value"), [
    ("8", 8), ("500m", Fraction(1, 2)), ("64Gi", 64 * 2**30), ("1.5", Fraction(3, 2)), ("2k", 2000),
    ("110", 110), ("1e3", 1000), ("100Mi", 100 * 2**20), (4, 4),
])
def test_parse_quantity(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "5Gb", "1.2.3", "--1", True])
def test_parse_quantity_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match="expected a Kubernetes quantity"):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_format_quantity_round_trips() -> None:
    assert format_quantity(parse_quantity("64Gi"), binary=True) == "64Gi"
    assert format_quantity(parse_quantity("250m")) == "250m"
    assert format_quantity(parse_quantity("8")) == "8"
    assert parse_quantity(format_quantity(parse_quantity("1536Mi"), binary=True)) == parse_quantity("1.5Gi")


def _kubeconfig(tmp_path: Path, user: dict[str, str], cluster_extra: dict[str, object] | None = None) -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443/", **(cluster_extra or {})}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}},
                     {"name": "b", "context": {"cluster": "c", "user": "u"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_relative_paths_and_inline_data(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_text("CA")
    (tmp_path / "pki" / "admin.crt").write_text("CERT")
    path = _kubeconfig(tmp_path, {"client-certificate": "pki/admin.crt",
                                  "client-key-data": base64.b64encode(b"KEY").decode()},
                       {"certificate-authority": "pki/ca.crt"})
    ep = load_endpoint(path)
    assert ep.server == "https://127.0.0.1:6443"
    assert ep.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert ep.cert_file == str(tmp_path / "pki" / "admin.crt")
    assert ep.key_file is not None and Path(ep.key_file).read_bytes() == b"KEY"
    assert ep.auth_headers() == {}


def test_kubeconfig_token_and_named_context(tmp_path: Path) -> None:
    ep = load_endpoint(_kubeconfig(tmp_path, {"token": "abc"}), context="b")
    assert ep.auth_headers() == {"Authorization": "Bearer abc"}


def test_kubeconfig_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="not found"):
        load_endpoint(tmp_path / "missing")
    with pytest.raises(KubeconfigError, match="zzz"):
        load_endpoint(_kubeconfig(tmp_path, {"token": "x"}), context="zzz")


def test_kubeconfig_env_list_is_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$KUBECONFIG lists are merged as kubectl does: the context may live in the second file."""
    first = tmp_path / "one"
    first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "b"}))
    second = _kubeconfig(tmp_path, {"token": "from-second"})
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    ep = load_endpoint()
    assert ep.context == "b" and ep.auth_headers() == {"Authorization": "Bearer from-second"}


def _exec_plugin(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "plugin.py"
    script.write_text(f"#!{sys.executable}\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.integration  # starts a process
def test_kubeconfig_exec_plugin_token_is_refreshed_when_it_expires(tmp_path: Path) -> None:
    counter = tmp_path / "calls"
    plugin = _exec_plugin(tmp_path, f"""
import datetime, json, pathlib
p = pathlib.Path({str(counter)!r}); n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n))
exp = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": f"tok-{{n}}", "expirationTimestamp": exp}}}}))""")
    path = _kubeconfig(tmp_path, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                                            "interactiveMode": "Never"}})  # type: ignore[dict-item]
    ep = load_endpoint(path)
    first = ep.auth_headers()
    assert first["Authorization"].startswith("Bearer tok-")
    calls = int(counter.read_text())
    time.sleep(1.5)
    import kubecore.config as cfg

    assert ep.refresh is not None
    ep.refresh._checked = -cfg.TOKEN_RECHECK_S  # type: ignore[attr-defined]  # skip the recheck pause
    again = ep.auth_headers()
    assert int(counter.read_text()) > calls and again != first


def test_kubeconfig_failing_exec_plugin_is_an_error_not_anonymous(tmp_path: Path) -> None:
    plugin = _exec_plugin(tmp_path, "import sys; sys.exit(3)")
    path = _kubeconfig(tmp_path, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin),
                                            "interactiveMode": "Never"}})  # type: ignore[dict-item]
    with pytest.raises(KubeconfigError, match="no credentials"):
        load_endpoint(path)


# ------------------------------------------------------------------------------------------------ durations


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), ("500us", 5e-4), ("500µs", 5e-4),
    ("1.5h", 5400), (".5s", 0.5), ("0", 0), ("+3s", 3), ("1h2m3.5s", 3723.5), ("10ns", 1e-8),
])
def test_go_duration_grammar(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5x", "m5", "1h 30m", "-3s", "3", "s", "1..5s", "forever!", "1e3s"])
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_go_duration(text)


def test_forever_only_where_allowed() -> None:
    assert math.isinf(parse_go_duration("forever"))
    with pytest.raises(ValueError, match="finite"):
        parse_go_duration("Forever", allow_forever=False)
    assert to_seconds(12.5) == 12.5 and to_seconds("2m") == 120
    for bad in (True, -1, float("nan"), float("inf"), None, [1]):
        with pytest.raises(ValueError):
            to_seconds(bad)


@given(st.integers(min_value=0, max_value=10**15))
def test_go_duration_format_round_trips(ns: int) -> None:
    text = format_go_duration(ns / 1e9)
    assert round(parse_go_duration(text) * 1e9) == ns


@pytest.mark.parametrize(("seconds", "text"), [(90, "1m30s"), (0.25, "250ms"), (3723.5, "1h2m3.5s"), (0, "0s"),
                                                (5e-4, "500µs"), (math.inf, "forever"), (7200, "2h0m0s")])
def test_go_duration_format_is_gos(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text


# ------------------------------------------------------------------------------------------------ distributions


@pytest.mark.parametrize("doc", [
    "30s", 12.5, "forever", {"dist": "fixed", "value": "3s"}, {"dist": "uniform", "min": "30s", "max": "90s"},
    {"dist": "normal", "mean": "60s", "stddev": "10s", "min": "5s"}, {"dist": "exponential", "mean": 20, "max": "90s"},
    {"dist": "lognormal", "median": "30s", "sigma": 0.5, "max": "5m"}, {"dist": "forever"},
])
def test_distribution_shapes_round_trip(doc: object) -> None:
    d = parse_dist(doc)
    assert parse_dist(d.to_doc()) == d


@pytest.mark.parametrize(("doc", "key", "text"), [
    ({"dist": "pareto"}, "dist", "expected one of " + ", ".join(DIST_NAMES)),
    ({"dist": "uniform", "min": "9s", "max": "3s"}, "max", "expected max >= min"),
    ({"dist": "uniform", "min": "1s"}, "max", "is required"),
    ({"dist": "normal", "mean": "1s", "stddev": "1s", "jitter": 1}, "jitter", "unknown key"),
    ({"dist": "lognormal", "median": "1s", "sigma": -1}, "sigma", "expected a number >= 0"),
    ("ten minutes", "", "expected a Go duration"),
    (True, "", "expected a duration"),
])
def test_distribution_errors_name_the_key(doc: object, key: str, text: str) -> None:
    with pytest.raises(DistError) as info:
        parse_dist(doc)
    assert info.value.key == key and text in info.value.message


def test_forever_refused_where_a_duration_must_end() -> None:
    with pytest.raises(DistError, match="finite"):
        parse_dist("forever", allow_forever=False)
    with pytest.raises(DistError, match="finite"):
        parse_dist({"dist": "forever"}, allow_forever=False)


def test_keyed_draws_are_stable_and_clamped() -> None:
    d = DurationDist("normal", 10.0, 50.0, 2.0, 12.0)
    draws = [d.sample_for("uid-1", str(i)) for i in range(200)]
    assert draws == [d.sample_for("uid-1", str(i)) for i in range(200)]
    assert min(draws) >= 2.0 and max(draws) <= 12.0 and len(set(draws)) > 3
    u = DurationDist("uniform", minimum=30, maximum=90)
    rng = random.Random(1)
    xs = [u.sample(rng) for _ in range(2000)]
    assert min(xs) >= 30 and max(xs) <= 90 and abs(sum(xs) / len(xs) - u.mean()) < 2  # type: ignore[operator]


# ------------------------------------------------------------------------------------------------ strict YAML


@pytest.mark.parametrize(("text", "why"), [
    ("a: yes", "boolean in YAML 1.1"), ("a: off", "boolean in YAML 1.1"), ("a: 1:30", "base-60"),
    ("a: 0755", "leading zero"), ("a: 1\na: 2", "given twice"), ("a: &x [1]\nb: *x", "aliases"),
    ("a: [1, 2", "not valid YAML (line 1"), ("? [1]\n: 2", "plain value"),
])
def test_strict_yaml_refuses_what_a_careful_reader_would(text: str, why: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_yaml(text, "f.yaml")
    assert why in str(info.value) and str(info.value).startswith("f.yaml: ")


def test_strict_yaml_keeps_what_is_clear(tmp_path: Path) -> None:
    assert parse_yaml('a: "yes"\nb: true\nc: 1e3\nd: 0\ne: 1_000\nf: 0x10', "f") == \
        {"a": "yes", "b": True, "c": 1000.0, "d": 0, "e": 1000, "f": 16}
    with pytest.raises(SpecError, match="file not found"):
        load_yaml(tmp_path / "nope.yaml")
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * (2 << 20))
    with pytest.raises(SpecError, match="too large"):
        load_yaml(big)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_yaml(tmp_path / "bin.yaml")


# ------------------------------------------------------------------------------------------------ schema


class _Inner(Spec):
    size: number(0, 10, integer=True)  # type: ignore[valid-type]
    wait: Seconds = 1.0


class _Outer(Spec):
    kind: one_of("a", "b")  # type: ignore[valid-type]
    inner: _Inner
    run: Dist
    items: tuple[_Inner, ...] = ()


def test_schema_collects_every_error_with_paths() -> None:
    with pytest.raises(SpecError) as info:
        validate(_Outer, {"kind": "c", "inner": {"size": 11, "wait": "soon", "colour": 1},
                          "run": {"dist": "uniform", "min": "3s", "max": "1s"}, "items": [{"size": "2"}]}, "x.yaml")
    got = {e.path: e.message for e in info.value.errors}
    assert got["kind"] == "expected one of a, b, got 'c'"
    assert got["inner.size"] == "expected an integer <= 10, got 11"
    assert got["inner.wait"].startswith("expected a Go duration")
    assert got["inner.colour"] == "unknown key (expected one of: size, wait)"
    assert got["run.max"].startswith("expected max >= min")
    assert got["items[0].size"] == "expected an integer, got str '2'"
    assert all(line.startswith("x.yaml: ") for line in str(info.value).splitlines())


def test_schema_missing_and_wrong_container() -> None:
    with pytest.raises(SpecError) as info:
        validate(_Outer, {"inner": [], "run": "3s"}, "y")
    got = {e.path: e.message for e in info.value.errors}
    assert got == {"kind": "is required", "inner": "expected a mapping, got a list"}


# ------------------------------------------------------------------------------------------------ metrics text, processes


def test_prometheus_text_goes_through_the_library() -> None:
    text = ('# HELP req_total Requests.\n# TYPE req_total counter\nreq_total{verb="GET",code="200"} 3\n'
            'req_total{verb="POST",code="201"} 4\nup 1\n')
    samples = parse_samples(text)
    assert samples['req_total{code="200",verb="GET"}'] == 3 and samples["up"] == 1
    assert total(samples, "req_total") == 7
    with pytest.raises(ValueError):
        parse_samples("this is { not metrics")


def _live_members(pgid: int) -> list[int]:
    """PIDs of the process group's members that are not zombies, read from /proc (``pgrep`` is procps,
    which a minimal Debian does not have and setup does not install)."""
    members = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, pgrp = stat_file.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if int(pgrp) == pgid and state != "Z":
            members.append(int(stat_file.parent.name))
    return members


@pytest.mark.integration  # starts a process
def test_child_announces_its_port_and_its_group_is_stopped(tmp_path: Path) -> None:
    import re

    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            "print('ready on port 4242', flush=True); time.sleep(60)")
    proc = spawn([sys.executable, "-c", code], tmp_path / "c.log", stdout_pipe=True)
    match = read_announced(proc, re.compile(rb"port (\d+)"), 20, "child", tmp_path / "c.log")
    assert match.group(1) == b"4242"
    pgid = os.getpgid(proc.pid)
    assert pgid == proc.pid  # its own session and group
    assert stop_group(proc, grace_s=5) is not None
    time.sleep(0.2)
    assert _live_members(pgid) == []  # zombies of a SIGKILLed grandchild wait for init to reap them


def test_go_durations_add_up_in_whole_nanoseconds() -> None:
    assert parse_go_duration("5012ms") == 5.012 and parse_go_duration("1.1s") == 1.1
    assert parse_go_duration("0.000000001s") == 1e-9


@pytest.mark.integration  # starts a process
def test_a_silent_child_does_not_hang_the_reader(tmp_path: Path) -> None:
    import re

    proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log", stdout_pipe=True)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not announce"):
        read_announced(proc, re.compile(rb"port"), 1.5, "silent child", tmp_path / "s.log")
    assert time.monotonic() - started < 5 and proc.poll() is not None
