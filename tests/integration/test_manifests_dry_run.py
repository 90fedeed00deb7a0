"""Every manifest under deploy/ is accepted by a real kube-apiserver (server-side dry-run).

``kubectl apply --dry-run=server --validate=strict`` runs the request through the apiserver's decoding,
defaulting, strict field validation, validation and admission without storing anything, against the
session ``cluster``. A Kustomize directory (one with ``kustomization.yaml``) is rendered with
``kubectl kustomize``; other YAML files are applied as they are. The namespaces the manifests need (a
fresh one for the unnamespaced objects, plus any they name) are created by the test and deleted after.
A copy with an unknown field must be refused, naming it, so a pass means the server really checked.
"""

from __future__ import annotations

import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.cluster.local import ClusterInfo

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUSTOMIZATION = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def manifest_sources(root: Path = DEPLOY) -> list[Path]:
    """Kustomize directories and the YAML files outside them, sorted."""
    dirs = sorted({p.parent for name in KUSTOMIZATION for p in root.rglob(name)})
    files = sorted(
        p for ext in ("*.yaml", "*.yml") for p in root.rglob(ext)
        if not any(d == p.parent or d in p.parents for d in dirs)
    )  # fmt: skip
    return [*dirs, *files]


def _run(kubectl: list[str], args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=120)


def _render(kubectl: list[str], source: Path) -> list[dict[str, Any]]:
    if source.is_dir():
        p = _run(kubectl, ["kustomize", str(source)])
        assert p.returncode == 0, f"kubectl kustomize {source} failed:\n{p.stderr}"
        text = p.stdout
    else:
        text = source.read_text()
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(scope="module")
def rendered(kubectl: list[str]) -> dict[Path, list[dict[str, Any]]]:
    sources = manifest_sources()
    assert sources, f"no manifests under {DEPLOY}: expected Kustomize directories or YAML files"
    out = {s: _render(kubectl, s) for s in sources}
    for s, docs in out.items():
        assert docs, f"{s} renders no objects"
    return out


@pytest.fixture(scope="module")
def namespaces(kubectl: list[str], rendered: dict[Path, list[dict[str, Any]]]) -> Iterator[str]:
    """A fresh namespace for the unnamespaced objects, plus the ones the manifests name; deleted after."""
    default_ns = f"dryrun-{secrets.token_hex(4)}"
    named = {d.get("metadata", {}).get("namespace") for docs in rendered.values() for d in docs} - {None}
    own_ns = {d["metadata"]["name"] for docs in rendered.values() for d in docs if d.get("kind") == "Namespace"}
    created: list[str] = []
    try:
        for ns in sorted({default_ns, *named} - own_ns):
            if _run(kubectl, ["get", "namespace", ns]).returncode == 0:
                continue  # somebody else's: used, never deleted
            p = _run(kubectl, ["create", "namespace", ns])
            assert p.returncode == 0, p.stderr
            created.append(ns)
        yield default_ns
    finally:
        for ns in created:
            _run(kubectl, ["delete", "namespace", ns, "--wait=false"])


def _dry_run(kubectl: list[str], ns: str, docs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """Apply ``docs`` as a server-side dry run; objects without a namespace go to ``ns``.

    ``ns`` is the kubeconfig context's namespace, not ``-n``: with an explicit ``-n`` kubectl refuses
    every object that names another namespace (the RBAC of ``deploy/hollowscale/target`` names
    ``kube-node-lease``), while a context namespace is only the default.
    """
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "kubeconfig"
        raw = _run(kubectl, ["config", "view", "--raw"])
        assert raw.returncode == 0, raw.stderr
        config.write_text(raw.stdout)
        scoped = [kubectl[0], f"--kubeconfig={config}"]
        p = _run(scoped, ["config", "set-context", "--current", f"--namespace={ns}"])
        assert p.returncode == 0, p.stderr
        return _run(
            scoped,
            ["apply", "--dry-run=server", "--validate=strict", "-o", "name", "-f", "-"],
            stdin=yaml.safe_dump_all(docs),
        )


def test_deploy_has_manifests() -> None:
    assert manifest_sources(), f"no manifests under {DEPLOY}"


def test_every_manifest_is_accepted_by_the_apiserver(
    cluster: ClusterInfo, kubectl: list[str], rendered: dict[Path, list[dict[str, Any]]], namespaces: str
) -> None:
    for source, docs in rendered.items():
        p = _dry_run(kubectl, namespaces, docs)
        assert p.returncode == 0, f"{source.relative_to(DEPLOY.parent)} refused by the apiserver:\n{p.stderr}"
        accepted = {line.strip().split("/", 1)[1] for line in p.stdout.splitlines() if "/" in line}
        names = {d["metadata"]["name"] for d in docs}
        assert names <= accepted, f"{source}: not applied: {sorted(names - accepted)} (output: {p.stdout})"
        for d in docs:  # a dry run stores nothing
            ns = d["metadata"].get("namespace") or namespaces
            got = _run(kubectl, ["get", d["kind"], d["metadata"]["name"], "-n", ns, "-o", "name"])
            assert got.returncode != 0 and "NotFound" in got.stderr, f"{d['kind']}/{d['metadata']['name']} exists"


def test_an_unknown_field_is_refused_naming_it(
    kubectl: list[str], rendered: dict[Path, list[dict[str, Any]]], namespaces: str
) -> None:
    """The check above can fail: the same objects with one unknown field are refused."""
    source, docs = next(iter(rendered.items()))
    target = next(d for d in docs if isinstance(d.get("spec"), dict))
    broken = [dict(d) for d in docs]
    i = docs.index(target)
    broken[i] = {**target, "spec": {**target["spec"], "hollowscaleNotAField": 1}}
    p = _dry_run(kubectl, namespaces, broken)
    assert p.returncode != 0, f"{source}: the apiserver accepted an unknown field"
    assert 'unknown field "spec.hollowscaleNotAField"' in p.stderr, p.stderr


def test_sources_are_kustomize_dirs_and_loose_files(tmp_path: Path) -> None:
    assert manifest_sources(tmp_path) == []  # an empty deploy/ is what test_deploy_has_manifests refuses
    (tmp_path / "app" / "base").mkdir(parents=True)
    (tmp_path / "app" / "kustomization.yaml").write_text("resources: [base/a.yaml]\n")
    (tmp_path / "app" / "base" / "a.yaml").write_text("kind: ConfigMap\n")
    (tmp_path / "loose.yml").write_text("kind: ConfigMap\n")
    assert manifest_sources(tmp_path) == [tmp_path / "app", tmp_path / "loose.yml"]
