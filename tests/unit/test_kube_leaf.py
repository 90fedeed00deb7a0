"""The leaf helpers: quantities and kubeconfig loading."""

from __future__ import annotations

import base64
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from hollowscale.kube import format_quantity, load_endpoint, parse_quantity
from kubecore.config import KubeconfigError


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
    with pytest.raises(KubeconfigError, match="no context named 'zzz'"):
        load_endpoint(_kubeconfig(tmp_path, {"token": "x"}), context="zzz")
