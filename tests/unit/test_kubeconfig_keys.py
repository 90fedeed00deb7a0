"""Keys and certificates embedded in a kubeconfig never reach the temp folder (kubecore/config.py): the
official client's loader would write them there with ``mkstemp`` and remove them only at a normal exit."""

from __future__ import annotations

import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubeconfigs import cert_and_key, embedded_kubeconfig
from kubernetes.config import kube_config

from kubecore.config import client_configuration, in_memory, load_endpoint, shareable_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The process's temp folder pointed at an empty folder of the test's, to see what lands there."""
    folder = tmp_path / "machine-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder


def test_embedded_keys_are_in_memory_and_nothing_is_written(tmp_path: Path, temp_folder: Path) -> None:
    cert, key = cert_and_key()
    client_files = dict(kube_config._temp_files)
    ep = load_endpoint(embedded_kubeconfig(tmp_path, cert, key))
    assert all(in_memory(p) for p in (ep.ca_file, ep.cert_file, ep.key_file))
    assert Path(ep.key_file or "").read_bytes() == key and Path(ep.cert_file or "").read_bytes() == cert
    ep.ssl_context()  # OpenSSL reads the memory files as files: a real chain loads
    assert list(temp_folder.iterdir()) == [] and kube_config._temp_files == client_files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeconfig", "machine-tmp"]
    again = load_endpoint(embedded_kubeconfig(tmp_path, cert, key))
    assert again.key_file == ep.key_file  # one memory file per content, however often it is loaded


def test_keys_dir_holds_the_files_private_and_named_by_content(tmp_path: Path, temp_folder: Path) -> None:
    cert, key = cert_and_key()
    keys = tmp_path / "run" / "keys"
    ep = load_endpoint(embedded_kubeconfig(tmp_path, cert, key), keys_dir=keys)
    files = sorted(keys.iterdir())
    assert files == sorted(Path(p or "") for p in (ep.ca_file, ep.cert_file, ep.key_file))
    assert Path(ep.key_file or "").read_bytes() == key and Path(ep.ca_file or "").read_bytes() == cert
    assert sorted(p.name.split("-")[0] + p.suffix for p in files) == ["ca.crt", "client.crt", "client.key"]
    assert all(re.fullmatch(r"(ca|client)-[0-9a-f]{16}\.(crt|key)", p.name) for p in files)
    load_endpoint(embedded_kubeconfig(tmp_path, cert, key), keys_dir=keys)
    assert sorted(keys.iterdir()) == files  # loaded again: the same files, no more
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert list(temp_folder.iterdir()) == []


def test_client_configuration_for_the_generated_apis(tmp_path: Path, temp_folder: Path) -> None:
    cert, key = cert_and_key()
    cfg = client_configuration(embedded_kubeconfig(tmp_path, cert, key))
    assert cfg.host == "https://127.0.0.1:6443" and in_memory(cfg.key_file) and in_memory(cfg.ssl_ca_cert)
    assert list(temp_folder.iterdir()) == []


def test_shareable_file_copies_only_memory_files(tmp_path: Path) -> None:
    cert, key = cert_and_key()
    ep = load_endpoint(embedded_kubeconfig(tmp_path, cert, key))
    out = shareable_file(ep.key_file, tmp_path / "prom", "client.key")
    assert out == str(tmp_path / "prom" / "client.key") and Path(out).read_bytes() == key
    assert stat.S_IMODE(Path(out).stat().st_mode) == 0o600
    plain = tmp_path / "ca.crt"
    assert shareable_file(str(plain), tmp_path / "prom", "ca.crt") == str(plain)
    assert shareable_file(None, tmp_path / "prom", "x") is None


def test_a_shareable_file_in_a_relative_folder_is_named_absolutely(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Prometheus resolves a relative path in its config from the config's folder: a run folder given
    relatively (``reports/<run>/prometheus``) once doubled into ``reports/<run>/prometheus/reports/...``
    and no target of a kind cluster was scraped."""
    cert, key = cert_and_key()
    ep = load_endpoint(embedded_kubeconfig(tmp_path, cert, key))
    monkeypatch.chdir(tmp_path)
    out = shareable_file(ep.key_file, Path("run") / "prometheus" / "tls", "client.key")
    assert out == str(tmp_path / "run" / "prometheus" / "tls" / "client.key") and Path(out).read_bytes() == key


#: the client's loaders that write embedded keys into the temp folder; kubecore.config wraps them
_CLIENT_LOADERS = re.compile(r"\b(load_kube_config|new_client_from_config|load_kube_config_from_dict|"
                             r"new_client_from_config_dict)\s*\(")


#: a line that calls the client's loader to show what it leaves (tests/integration/test_kubeconfig_keys_killed.py)
_ON_PURPOSE = "# on purpose: the client's own loader"


def test_nothing_but_kubecore_calls_the_clients_kubeconfig_loaders() -> None:
    """Every kubeconfig goes through kubecore.config (keys in memory or a folder of ours): a direct call
    of the client's loaders (which put keys in /tmp) anywhere else in our code is named here."""
    found = []
    for folder in ("kubecore", "hollowscale", "hollow", "loadgen", "distill", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path in (Path(__file__).resolve(), ROOT / "kubecore" / "config.py"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _CLIENT_LOADERS.search(line) and not line.lstrip().startswith("#") and _ON_PURPOSE not in line:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_prometheus_gets_files_of_its_own_for_in_memory_keys_and_they_go_at_stop(tmp_path: Path) -> None:
    from hollowscale.measure.prom import PrometheusServer, Target, scrape_config

    cert, key = cert_and_key()
    ep = load_endpoint(embedded_kubeconfig(tmp_path, cert, key))
    plain = tmp_path / "token-ca.crt"
    targets = [Target("apiserver", "https", ["127.0.0.1:6443"], ca_file=ep.ca_file, cert_file=ep.cert_file,
                      key_file=ep.key_file),
               Target("kueue", "https", ["127.0.0.1:8443"], ca_file=str(plain))]
    prom = PrometheusServer(tmp_path / "prometheus", targets)
    readable = prom._readable_targets()
    tls = scrape_config(readable, 1.0)["scrape_configs"][0]["tls_config"]
    made = [Path(tls[k]) for k in ("ca_file", "cert_file", "key_file")]
    assert all(p.parent == tmp_path / "prometheus" / "tls" and stat.S_IMODE(p.stat().st_mode) == 0o600 for p in made)
    assert made[2].read_bytes() == key and readable[1].ca_file == str(plain)  # a real file is handed on as it is
    prom.stop()  # no process was started: only the files go
    assert not (tmp_path / "prometheus" / "tls").exists() and prom.shared == []
