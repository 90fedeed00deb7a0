"""What the harness did not make survives it: files, folders and links found in the places it writes.

Each test puts a foreign thing where the harness removes or replaces its own, runs the code, and checks
the foreign thing is still there, unchanged (issue 22, section 3).  The API objects' side of the rule is
in ``tests/integration/test_never_delete_foreign_cluster.py`` (against the real local control plane).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hollowscale.cluster import binaries, clusterdir


def _fake_go(outputs: list[str]) -> Callable[[list[str], Path, object, str], None]:
    """A ``_run_go`` stand-in that 'builds' ``outputs`` into the work dir's ``out/`` (Go is not run)."""

    def run_go(args: list[str], cwd: Path, progress: object, what: str) -> None:
        for name in outputs:
            (cwd / "out" / name).write_text(f"built {name}")

    return run_go


def _no_go(monkeypatch: pytest.MonkeyPatch, outputs: list[str]) -> None:
    """The build without Go: ``go build`` writes ``outputs``, ``go version`` answers without a process."""
    import subprocess

    monkeypatch.setattr(binaries, "_run_go", _fake_go(outputs))
    monkeypatch.setattr(binaries, "go_binary", lambda: "go")
    monkeypatch.setattr(binaries.subprocess, "run",
                        lambda *_a, **_k: subprocess.CompletedProcess([], 0, stdout="go version go1.26.0\n"))


def test_a_rebuild_replaces_only_the_files_it_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "bin" / "v1"
    final.mkdir(parents=True)
    (final / "kubelet").write_text("the kubelet, built on its own")
    (final / "notes.txt").write_text("a user's notes")
    (final / "kube-apiserver").write_text("old apiserver")
    _no_go(monkeypatch, ["kube-apiserver"])
    binaries._build_into(final, "module x", ["k8s.io/kubernetes/cmd/kube-apiserver"], "", "building", None)
    assert (final / "kube-apiserver").read_text() == "built kube-apiserver"
    assert (final / "kubelet").read_text() == "the kubelet, built on its own"
    assert (final / "notes.txt").read_text() == "a user's notes"
    assert sorted(p.name for p in final.parent.iterdir()) == ["v1"]  # the temp work dir is gone


def test_a_kubelet_build_leaves_a_same_named_staging_folder_alone(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    final = tmp_path / "bin" / "v1" / "kubelet"
    final.parent.mkdir(parents=True)
    (final.parent / "kube-apiserver").write_text("apiserver")
    foreign = tmp_path / "bin" / ".v1-kubelet"  # the fixed staging name the build used to rmtree
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours")
    _no_go(monkeypatch, ["kubelet"])
    binaries._build_file_into(final, "module x", "k8s.io/kubernetes/cmd/kubelet", "", "building", None)
    assert final.read_text() == "built kubelet"
    assert (final.parent / "kube-apiserver").read_text() == "apiserver"
    assert (foreign / "keep.txt").read_text() == "not ours"
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [".v1-kubelet", "v1"]


# ------------------------------------------------------------------------------------------ cluster dirs
def test_a_folder_up_created_goes_whole_with_down(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "cluster"
    clusterdir.claim_cluster_dir(folder)
    assert clusterdir.is_cluster_dir(folder)
    (folder / "logs").mkdir()
    (folder / "logs" / "etcd.log").write_text("log")
    (folder / "state.json").write_text("{}")
    for installed in ("kueue", "jobset"):  # the installed controllers' folders are the cluster's too
        (folder / installed / "webhook-certs").mkdir(parents=True)
        (folder / installed / "webhook-certs" / "tls.key").write_text("key")
    removal = clusterdir.remove_cluster_dir(folder, mounts=set())
    assert removal == clusterdir.Removal(removed_dir=True, left=[])
    assert not folder.exists() and (tmp_path / "new").is_dir()  # a parent up made for it is not ours to judge


def test_an_empty_folder_given_to_up_stays_after_down(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    clusterdir.claim_cluster_dir(folder)
    (folder / "pki").mkdir()
    (folder / "kubeconfig").write_text("x")
    removal = clusterdir.remove_cluster_dir(folder, mounts=set())
    assert removal == clusterdir.Removal(removed_dir=False, left=[])
    assert folder.is_dir() and list(folder.iterdir()) == []


def test_up_refuses_a_folder_with_someone_elses_files_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    with pytest.raises(clusterdir.ForeignDirError, match=r"project is not empty \(thesis.tex\) and is not a "
                                                         r"hollowscale cluster folder"):
        clusterdir.claim_cluster_dir(folder)
    assert [p.name for p in folder.iterdir()] == ["thesis.tex"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(clusterdir.ForeignDirError, match="is not a folder"):
        clusterdir.claim_cluster_dir(tmp_path / "file")


def test_down_leaves_and_reports_what_someone_put_in_a_cluster_folder(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    clusterdir.claim_cluster_dir(folder)
    (folder / "etcd").mkdir()
    (folder / "notes.txt").write_text("mine")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data").write_text("keep")
    (folder / "logs").mkdir()
    (folder / "logs" / "link").symlink_to(outside)  # a link inside an entry of ours: the link goes, not its target
    removal = clusterdir.remove_cluster_dir(folder, mounts=set())
    assert removal.left == [f"{folder / 'notes.txt'} (not made by hollowscale)"] and not removal.removed_dir
    assert sorted(p.name for p in folder.iterdir()) == [clusterdir.MARKER, "notes.txt"]
    assert (outside / "data").read_text() == "keep"
    (folder / "notes.txt").unlink()  # once it is gone, a second down finishes the job
    assert clusterdir.remove_cluster_dir(folder, mounts=set()).removed_dir and not folder.exists()


def test_down_never_crosses_a_mount_point(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    clusterdir.claim_cluster_dir(folder)
    mounted = folder / "real" / "hs-real-0" / "kubelet"
    mounted.mkdir(parents=True)
    (mounted / "on-another-filesystem").write_text("x")
    removal = clusterdir.remove_cluster_dir(folder, mounts={str(mounted)})
    assert removal.left == [f"{mounted} (a mount point: unmount it, then remove it)"]
    assert (mounted / "on-another-filesystem").exists()


def test_an_unmarked_folder_is_not_touched(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{}")
    (tmp_path / "logs").mkdir()
    removal = clusterdir.remove_cluster_dir(tmp_path, mounts=set())
    assert not removal.removed_dir and "not a hollowscale cluster folder" in removal.left[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "state.json"]


def test_cluster_down_on_a_folder_that_is_no_cluster_exits_3_and_removes_nothing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hollowscale.cli import main

    (tmp_path / "work.py").write_text("print('precious')")
    result = CliRunner().invoke(main, ["cluster", "down", "--dir", str(tmp_path)])
    assert result.exit_code == 3, result.output
    assert "no cluster in" in result.output and "nothing removed" in result.output
    assert "Traceback" not in result.output
    assert (tmp_path / "work.py").read_text() == "print('precious')"
    result = CliRunner().invoke(main, ["cluster", "down", "--dir", str(tmp_path / "absent")])
    assert result.exit_code == 3 and "no such folder" in result.output
    assert not (tmp_path / "absent").exists()


def test_cluster_up_into_a_folder_with_someone_elses_files_says_so_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hollowscale.cli import main

    (tmp_path / "work.py").write_text("print('precious')")
    result = CliRunner().invoke(main, ["cluster", "up", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "is not empty (work.py) and is not a hollowscale cluster folder" in " ".join(result.output.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work.py"]


# ------------------------------------------------------------------------------------------ real nodes' host state
@pytest.fixture
def fake_host(short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``host`` pointed at a folder of the test: claim dir, shared paths, /proc/sys; returns that folder
    (a short one: a test binds a unix socket in it, and pytest's own folders under xdist pass 108 bytes)."""
    tmp_path = short_tmp_path
    from hollowscale.cluster.realnode import host

    monkeypatch.setattr(host, "CLAIM_DIR", tmp_path / "run-hollowscale")
    monkeypatch.setattr(host, "CLAIM_FILE", tmp_path / "run-hollowscale" / "realnodes.json")
    monkeypatch.setattr(host, "SHARED_PATHS", (tmp_path / "var-lib-kubelet", tmp_path / "var-log-containers"))
    monkeypatch.setattr(host, "CGROUP_ROOT", tmp_path / "no-cgroups")
    monkeypatch.setattr(host, "SYSCTL_ROOT", tmp_path / "proc-sys")
    monkeypatch.setattr(host, "SYSCTLS", ("vm/overcommit_memory", "kernel/panic"))
    monkeypatch.setattr(host, "machine_networks", lambda: [])
    (tmp_path / "proc-sys" / "vm").mkdir(parents=True)
    (tmp_path / "proc-sys" / "kernel").mkdir()
    (tmp_path / "proc-sys" / "vm" / "overcommit_memory").write_text("0\n")
    (tmp_path / "proc-sys" / "kernel" / "panic").write_text("0\n")
    return tmp_path


def test_release_sets_back_only_the_sysctls_still_at_the_kubelets_value(fake_host: Path) -> None:
    from hollowscale.cluster.realnode import host

    cluster = fake_host / "c"
    cluster.mkdir()
    host.claim(cluster, "hsbr-c")
    (fake_host / "proc-sys" / "vm" / "overcommit_memory").write_text("1\n")  # what the kubelet sets
    (fake_host / "proc-sys" / "kernel" / "panic").write_text("30\n")  # an admin's value, set after ours
    undone = host.release(cluster)
    assert "sysctl vm.overcommit_memory=0" in undone
    assert "left sysctl kernel.panic=30 (changed by someone else; it was 0)" in undone
    assert (fake_host / "proc-sys" / "vm" / "overcommit_memory").read_text() == "0"
    assert (fake_host / "proc-sys" / "kernel" / "panic").read_text() == "30\n"


def test_release_leaves_a_created_path_that_something_else_uses_by_then(fake_host: Path) -> None:
    import socket

    from hollowscale.cluster.realnode import host

    cluster = fake_host / "c"
    cluster.mkdir()
    host.claim(cluster, "hsbr-c")
    kubelet_dir, logs = fake_host / "var-lib-kubelet", fake_host / "var-log-containers"
    (kubelet_dir / "device-plugins").mkdir(parents=True)
    logs.mkdir()
    (logs / "ours.log").symlink_to(cluster / "real" / "hs-real-0" / "pod-logs" / "x.log")
    (logs / "theirs.log").symlink_to("/var/log/pods/another-kubelet/y.log")  # another kubelet came meanwhile
    with socket.socket(socket.AF_UNIX) as listening:  # ... and so did a program that listens here
        listening.bind(str(kubelet_dir / "device-plugins" / "kubelet.sock"))
        undone = host.release(cluster)
    assert any(u.startswith(f"left {kubelet_dir}: in use by something else") for u in undone), undone
    assert any(u.startswith(f"left {logs}: in use by something else") and "theirs.log" in u for u in undone)
    assert (kubelet_dir / "device-plugins" / "kubelet.sock").exists() and (logs / "theirs.log").is_symlink()


def test_release_removes_created_paths_holding_only_ours_and_keeps_a_claim_dir_it_found(fake_host: Path) -> None:
    from hollowscale.cluster.realnode import host

    host.CLAIM_DIR.mkdir()  # /run/hollowscale was there before the first claim
    cluster = fake_host / "c"
    cluster.mkdir()
    host.claim(cluster, "hsbr-c")
    logs = fake_host / "var-log-containers"
    logs.mkdir()
    (logs / "ours.log").symlink_to(cluster / "real" / "hs-real-0" / "pod-logs" / "x.log")
    (fake_host / "var-lib-kubelet" / "device-plugins").mkdir(parents=True)
    (fake_host / "var-lib-kubelet" / "device-plugins" / "kubelet_internal_checkpoint").write_text("{}")
    undone = host.release(cluster)
    assert f"removed {logs}" in undone and f"removed {fake_host / 'var-lib-kubelet'}" in undone
    assert host.CLAIM_DIR.is_dir() and list(host.CLAIM_DIR.iterdir()) == []


# ------------------------------------------------------------------------------------------ reports/latest
def _run(root: Path, name: str) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    return run


def test_latest_moves_from_run_to_run_as_a_relative_link(tmp_path: Path) -> None:
    from hollowscale.report.latest import update_latest

    first, second = _run(tmp_path, "r1"), _run(tmp_path, "r2")
    assert update_latest(tmp_path, first) == tmp_path / "latest"
    assert update_latest(tmp_path, second) == tmp_path / "latest"
    assert (tmp_path / "latest").readlink() == Path("r2") and first.is_dir()


@pytest.mark.parametrize("kind", ["folder", "file", "link elsewhere"])
def test_a_latest_someone_else_made_is_left_as_it_is(tmp_path: Path, kind: str) -> None:
    from hollowscale.report.latest import update_latest

    latest = tmp_path / "latest"
    if kind == "folder":
        latest.mkdir()
        (latest / "my-results.csv").write_text("mine")
    elif kind == "file":
        latest.write_text("mine")
    else:
        (tmp_path / "elsewhere").mkdir()
        latest.symlink_to(tmp_path / "elsewhere")  # absolute: not the relative link update_latest writes
    warnings: list[str] = []
    assert update_latest(tmp_path, _run(tmp_path, "r1"), warn=warnings.append) is None
    assert len(warnings) == 1 and "hollowscale did not make: left as it is" in warnings[0]
    if kind == "folder":
        assert (latest / "my-results.csv").read_text() == "mine"
    elif kind == "file":
        assert latest.read_text() == "mine"
    else:
        assert latest.readlink() == tmp_path / "elsewhere"


def test_where_links_fail_latest_is_a_marked_copy_replaced_by_the_next(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from hollowscale.report import latest as latest_module

    def no_links(*_a: object) -> None:
        raise OSError("links not supported here")

    monkeypatch.setattr(os, "symlink", no_links)
    latest_module.update_latest(tmp_path, _run(tmp_path, "r1"))
    latest_module.update_latest(tmp_path, _run(tmp_path, "r2"))
    latest = tmp_path / "latest"
    assert (latest / latest_module.LATEST_COPY_MARKER).is_file() and (latest / "summary.json").is_file()
    assert "r2" in (latest / latest_module.LATEST_COPY_MARKER).read_text()


# ------------------------------------------------------------------------------------------ plan folders
REPO = Path(__file__).resolve().parents[2]


def _plan_file(tmp_path: Path, cluster_dir: Path) -> Path:
    import yaml

    doc = yaml.safe_load((REPO / "scenarios" / "plan-small.yaml").read_text())
    doc["sweep"]["cluster_dir"] = str(cluster_dir)
    for pool in doc["pools"]:  # relative file names of the shipped scenario, read from its folder
        if isinstance(pool.get("stages"), str):
            pool["stages"] = str(REPO / "scenarios" / pool["stages"])
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_plan_never_writes_into_a_folder_that_holds_someone_elses_files(tmp_path: Path) -> None:
    from hollowscale.plan.state import PlanState, PlanStateError

    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "analysis.ipynb").write_text("{}")
    for fresh in (False, True):
        with pytest.raises(PlanStateError, match=r"results is not empty \(analysis.ipynb\) and holds no plan state"):
            PlanState(folder, "fp", fresh=fresh)
    (folder / "plan.json").write_text("my own plan, not hollowscale's")
    with pytest.raises(PlanStateError, match="is not a plan state of hollowscale's"):
        PlanState(folder, "fp", fresh=True)
    assert sorted(p.name for p in folder.iterdir()) == ["analysis.ipynb", "plan.json"]
    assert (folder / "plan.json").read_text() == "my own plan, not hollowscale's"
    PlanState(tmp_path / "new", "fp")  # a new folder is marked at once: a second start resumes it
    assert PlanState(tmp_path / "new", "fp").resumed == 0


def test_a_plan_whose_cluster_dir_holds_someone_elses_files_stops_in_one_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hollowscale.plan.cli import plan_cmd

    theirs = tmp_path / "proj-default"  # <sweep.cluster_dir>-<profile>
    theirs.mkdir()
    (theirs / "main.go").write_text("package main")
    result = CliRunner().invoke(plan_cmd, [str(_plan_file(tmp_path, tmp_path / "proj")), "--out",
                                           str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 1, result.output
    assert f"{theirs} is not empty (main.go) and is not a hollowscale cluster folder" in result.output
    assert isinstance(result.exception, SystemExit) and len(result.output.splitlines()) == 1  # no traceback
    assert sorted(p.name for p in theirs.iterdir()) == ["main.go"]


# ------------------------------------------------------------------------------------------ nightly
def test_a_nightly_baseline_update_never_writes_into_someone_elses_folder(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from hollowscale.nightly import DEFAULT_SET, main

    theirs = tmp_path / "baseline"
    theirs.mkdir()
    (theirs / "baseline.json").write_text('{"my": "own baseline format"}')
    code = main(["--set", str(DEFAULT_SET), "--out", str(tmp_path / "r"), "--baseline", str(theirs),
                 "--update-baseline"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: the baseline folder {theirs} is not empty (baseline.json) and holds no "
                          "hollowscale baseline") and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()  # nothing ran
    assert [p.name for p in theirs.iterdir()] == ["baseline.json"]
    assert (theirs / "baseline.json").read_text() == '{"my": "own baseline format"}'


# ------------------------------------------------------------------------------------------ image cache
def test_a_new_image_build_removes_only_its_own_older_archives(tmp_path: Path) -> None:
    from hollowscale.images.build import older_archives

    keep = tmp_path / "distill-cpu-0123456789abcdef.tar"
    older = tmp_path / "distill-cpu-fedcba9876543210.tar"
    others = [tmp_path / "distill-cpu-extra-0123456789abcdef.tar",  # another image whose name starts the same
              tmp_path / "distill-cpu-my-backup.tar", tmp_path / "distill-gpu-fedcba9876543210.tar"]
    for p in (keep, older, *others):
        p.write_text("tar")
    assert older_archives(tmp_path, "distill-cpu", keep) == [older]


def test_only_log_links_into_the_real_nodes_folder_are_the_clusters(tmp_path: Path) -> None:
    from hollowscale.cluster.realnode.teardown import is_ours

    cluster = tmp_path / "c"
    assert is_ours(str(cluster / "real" / "hs-real-0" / "pod-logs" / "x.log"), cluster)
    assert not is_ours(str(cluster / "logs" / "etcd.log"), cluster)  # the cluster dir, but not where kubelets log
    assert not is_ours(str(tmp_path / "c" / "realx" / "y.log"), cluster)
    assert not is_ours("/var/log/pods/another-kubelet/z.log", cluster)
    assert not is_ours(str(cluster / "real" / ".." / ".." / "elsewhere.log"), cluster)


@pytest.mark.parametrize("command", [["status"], ["fault", "kill", "kube-apiserver"], ["down"]])
def test_cluster_commands_on_someone_elses_state_say_so_in_one_line(tmp_path: Path, command: list[str]) -> None:
    from click.testing import CliRunner

    from hollowscale.cli import main

    (tmp_path / "state.json").write_text('{"someone": "else"}')
    result = CliRunner().invoke(main, ["cluster", *command, "--dir", str(tmp_path)])
    assert result.exit_code in (1, 3), result.output
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(result.exception, SystemExit)
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert (tmp_path / "state.json").read_text() == '{"someone": "else"}'


# ------------------------------------------------------------------------------------------ run folders
def test_two_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's report folder is one it made: a folder of that name already there (another run's, or
    someone's) is left as it is and the run takes the next free name."""
    import time

    from hollowscale.paths import REPO_ROOT, fresh_dir
    from hollowscale.run.orchestrator import Runner
    from hollowscale.scenario import load_scenario

    monkeypatch.setattr(time, "strftime", lambda _fmt: "20261205-120000")
    theirs = tmp_path / "20261205-120000-smoke"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    sc = load_scenario(REPO_ROOT / "scenarios" / "smoke.yaml")
    first, second = Runner(sc, tmp_path, quiet=True), Runner(sc, tmp_path, quiet=True)
    assert first.run_dir == tmp_path / "20261205-120000-smoke-2" and first.run_id == first.run_dir.name
    assert second.run_dir == tmp_path / "20261205-120000-smoke-3"
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]
    assert fresh_dir(tmp_path / "new", "x") == tmp_path / "new" / "x"
