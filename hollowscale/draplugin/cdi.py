"""CDI (the Container Device Interface): the spec files the plugin writes, and applying a device's edits to a
container's OCI spec where the runtime cannot.

A spec file is ``{"cdiVersion", "kind": "<vendor>/<class>", "devices": [{"name", "containerEdits"}],
"containerEdits"?}``; a device is named ``<kind>=<name>`` and what it does to a container is the spec's
``containerEdits`` followed by the device's own: ``env`` (``KEY=VALUE``, replacing a variable of the same
name), ``deviceNodes`` (created in the container and allowed in its device cgroup), ``mounts`` (bind mounts)
and ``hooks``.  :func:`apply_edits` does what containerd >= 1.7 and CRI-O do with them
(``container-device-interface/pkg/cdi/container-edits.go``); it is used by :mod:`hollowscale.draplugin.runtime`
because the real nodes' containerd (Debian's 1.6.20) has no CDI support at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: the OCI runtime spec's hook names a CDI spec may use
HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


class CdiError(ValueError):
    """A CDI device cannot be resolved or applied; the message names it."""


def spec_path(cdi_dir: Path, kind: str, claim_uid: str) -> Path:
    """Where the spec of one prepared claim lives: ``<dir>/<vendor>-<class>_<claim uid>.json``."""
    return cdi_dir / f"{kind.replace('/', '-')}_{claim_uid}.json"


def write_spec(cdi_dir: Path, claim_uid: str, spec: dict[str, Any]) -> Path:
    """Write (atomically: a runtime may read the dir at any moment) and return the spec file's path."""
    cdi_dir.mkdir(parents=True, exist_ok=True)
    path = spec_path(cdi_dir, spec["kind"], claim_uid)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def remove_spec(cdi_dir: Path, kind: str, claim_uid: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        spec_path(cdi_dir, kind, claim_uid).unlink()


def load_specs(cdi_dir: Path) -> dict[str, dict[str, Any]]:
    """Every spec of the dir by file name (``*.json``; a file that is not a spec is skipped)."""
    specs: dict[str, dict[str, Any]] = {}
    if not cdi_dir.is_dir():
        return specs
    for path in sorted(cdi_dir.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("kind"), str) and isinstance(doc.get("devices"), list):
            specs[path.name] = doc
    return specs


def resolve(names: Iterable[str], specs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The container edits of each qualified device name, in order (spec-level edits before the device's);
    :class:`CdiError` lists the names no spec defines."""
    index: dict[str, list[dict[str, Any]]] = {}
    for spec in specs.values():
        for dev in spec["devices"]:
            if isinstance(dev, dict) and "name" in dev:
                index[f"{spec['kind']}={dev['name']}"] = [e for e in (spec.get("containerEdits"),
                                                                      dev.get("containerEdits")) if e]
    wanted = list(dict.fromkeys(names))
    missing = [n for n in wanted if n not in index]
    if missing:
        raise CdiError(f"unresolvable CDI devices {', '.join(missing)}")
    return [e for n in wanted for e in index[n]]


def _device_numbers(path: str, stat_fn: Callable[[str], os.stat_result]) -> tuple[str, int, int, int]:
    st = stat_fn(path)
    if stat.S_ISCHR(st.st_mode):
        kind = "c"
    elif stat.S_ISBLK(st.st_mode):
        kind = "b"
    else:
        raise CdiError(f"CDI device node {path} is not a device")
    return kind, os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode)


def apply_edits(oci: dict[str, Any], edits: Iterable[dict[str, Any]],
                stat_fn: Callable[[str], os.stat_result] = os.stat) -> dict[str, Any]:
    """``oci`` (a container's ``config.json``) with ``edits`` applied in order; changed in place and returned."""
    process = oci.setdefault("process", {})
    linux = oci.setdefault("linux", {})
    for edit in edits:
        for entry in edit.get("env") or []:
            key = entry.split("=", 1)[0]
            env = [e for e in process.get("env") or [] if e.split("=", 1)[0] != key]
            process["env"] = [*env, entry]
        for node in edit.get("deviceNodes") or []:
            path = node["path"]
            host = node.get("hostPath") or path
            if "major" in node and "type" in node:
                kind, major, minor, mode = node["type"], node["major"], node.get("minor", 0), 0o666
            else:
                kind, major, minor, mode = _device_numbers(host, stat_fn)
            dev = {"path": path, "type": kind, "major": major, "minor": minor,
                   "fileMode": node.get("fileMode", mode), "uid": node.get("uid", 0), "gid": node.get("gid", 0)}
            linux["devices"] = [d for d in linux.get("devices") or [] if d.get("path") != path] + [dev]
            rules = linux.setdefault("resources", {}).setdefault("devices", [])
            rules.append({"allow": True, "type": kind, "major": major, "minor": minor,
                          "access": node.get("permissions") or "rwm"})
        for mount in edit.get("mounts") or []:
            oci.setdefault("mounts", []).append({"destination": mount["containerPath"], "source": mount["hostPath"],
                                                 "type": mount.get("type", "bind"),
                                                 "options": list(mount.get("options") or ["bind"])})
        for hook in edit.get("hooks") or []:
            name = hook.get("hookName")
            if name not in HOOK_NAMES:
                raise CdiError(f"CDI hook {hook!r}: hookName must be one of {', '.join(HOOK_NAMES)}")
            entry = {k: hook[k] for k in ("path", "args", "env", "timeout") if k in hook}
            oci.setdefault("hooks", {}).setdefault(name, []).append(entry)
    return oci
