"""``hollowscale trace to-scenario``: a trace scenario written from a trace and options reads back as the
replay will read it (variants, demand, seeds, the trace's files by paths relative to it), a user's
scheduler configuration becomes a variant, and nothing is ever overwritten or left behind: an existing
file stays byte for byte, a bad trace writes nothing, a written file that is refused is removed with
the folder made for it."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from hollowscale.cli import main
from hollowscale.replay import to_scenario
from hollowscale.scenario.trace import PACKING, TraceClusterSpec, load_trace_scenario
from hollowscale.trace import DumpOptions, read_trace
from kubecore.schema import SpecError, validate
from kubecore.yamlfile import load_yaml

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "traces" / "alibaba-gpu-2023"
EXCERPT = ROOT / "tests" / "fixtures" / "trace" / "excerpt"
DUMP = ROOT / "tests" / "fixtures" / "trace" / "cluster.json"
SCHEDULER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
             "percentageOfNodesToScore": 50, **PACKING}


def _write(*args: str) -> Result:
    return CliRunner().invoke(main, ["trace", "to-scenario", *args])


def _excerpt(out: Path, *args: str) -> Result:
    return _write(str(EXCERPT / "pods.csv"), "--nodes", str(EXCERPT / "nodes.csv"), "--out", str(out), *args)


def _same_file(scenario: Path, name: str, file: Path) -> bool:
    return (scenario.parent / name).resolve() == file.resolve()


def test_the_committed_trace_becomes_the_committed_scenario(tmp_path: Path) -> None:
    out = tmp_path / "scenarios" / "alibaba.yaml"
    result = _write(str(TRACE / "openb_pod_list_default.csv"), "--nodes", str(TRACE / "openb_node_list_gpu_node.csv"),
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.output == (f"{out}: trace scenario 'alibaba': 1,213 nodes (6,212 GPUs), 8,152 pods; variants "
                             f"default, packing; replay: hollowscale trace replay {out}\n")
    ts = load_trace_scenario(out)
    assert (len(ts.trace.nodes), ts.trace.gpus, len(ts.trace.pods)) == (1213, 6212, 8152)
    assert (ts.spec.mode, ts.spec.demand, ts.spec.seeds, ts.file.cluster.profile) == ("paper", 1.3, (42,), "scale")
    assert [(v.name, v.gpu_mode) for v in ts.file.variants] == [("default", "dra-shared"), ("packing", "dra-shared")]
    assert ts.scheduler_configs == {"default": {}, "packing": PACKING}
    assert _same_file(out, ts.spec.pods, TRACE / "openb_pod_list_default.csv")
    assert ts.spec.nodes and _same_file(out, ts.spec.nodes, TRACE / "openb_node_list_gpu_node.csv")
    assert not Path(ts.spec.pods).is_absolute()
    # the committed scenario, but for its name, description and where it is
    written, committed = load_yaml(out), load_yaml(ROOT / "scenarios" / "trace-alibaba-2023.yaml")
    for doc in (written, committed):
        for key in ("name", "description"):
            doc.pop(key, None)
        doc["workload"]["trace"].pop("pods")
        doc["workload"]["trace"].pop("nodes")
    assert written == committed
    text = out.read_text()
    head = text[: text.index("\nname: ")].splitlines()
    assert all(line.startswith("# ") for line in head)
    assert "1,213 nodes (1,213 with GPUs, 6,212 GPUs); 8,152 pods (1,088 CPU-only, 3,078 GPU share" in text
    assert f"# Run it:     hollowscale trace replay {out}\n" in text
    assert any(line.startswith("# Written by: hollowscale trace to-scenario ") and "--out" in line for line in head)


def test_the_options_are_written(tmp_path: Path) -> None:
    out = tmp_path / "mine.yml"
    result = _excerpt(out, "--name", "small", "--description", "yes: the excerpt, 0.9x", "--demand", "0.9",
                      "--seed", "7", "--seed", "1", "--profile", "default", "--variant", "packing", "--gpus", "claims",
                      "--no-gpu-sharing")
    assert result.exit_code == 0, result.output
    ts = load_trace_scenario(out)
    f = ts.file
    assert (f.name, f.description, f.cluster.profile) == ("small", "yes: the excerpt, 0.9x", "default")
    assert (ts.spec.demand, ts.spec.seeds) == (0.9, (7, 1))
    assert [(v.name, v.scheduler.profile, v.gpu_mode) for v in f.variants] == [("packing", "packing", "dra-whole")]
    assert (len(ts.trace.nodes), len(ts.trace.pods)) == (12, 30)
    assert "variants packing; replay:" in result.output
    # the command in the header writes the same scenario again
    line = next(x for x in out.read_text().splitlines() if x.startswith("# Written by: "))
    argv = shlex.split(line.removeprefix("# Written by: hollowscale "))
    argv[argv.index("--out") + 1] = str(tmp_path / "again.yml")
    assert CliRunner().invoke(main, argv).exit_code == 0
    again = load_yaml(tmp_path / "again.yml")
    assert again == load_yaml(out)


def test_a_timed_replay_has_its_own_keys(tmp_path: Path) -> None:
    out = tmp_path / "timed.yaml"
    result = _excerpt(out, "--mode", "timed", "--compress", "10000", "--window-start", "9500000")
    assert result.exit_code == 0, result.output
    ts = load_trace_scenario(out)
    assert (ts.spec.mode, ts.spec.compress, ts.spec.window and ts.spec.window.start_s) == ("timed", 10000, 9500000)
    trace = load_yaml(out)["workload"]["trace"]
    assert "demand" not in trace and "seeds" not in trace  # the timed mode refuses them
    assert "time-faithfully (mode timed)" in out.read_text()
    for args, bad in ((["--mode", "timed", "--compress", "10", "--seed", "3"], "--seed"),
                      (["--mode", "timed"], "--compress"), (["--compress", "10"], "--compress")):
        result = _excerpt(tmp_path / "bad.yaml", *args)
        assert result.exit_code == 2 and f"Invalid value for {bad}" in result.output, args
    # a trace without every pod's times is refused once written, and nothing stays
    result = _write(str(DUMP), "--out", str(tmp_path / "d" / "t.yaml"), "--mode", "timed", "--compress", "10")
    assert result.exit_code == 1 and "lack a creation or deletion time" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timed.yaml"]


def test_counted_gpus_are_never_shared(tmp_path: Path) -> None:
    out = tmp_path / "c.yaml"
    assert _excerpt(out, "--gpus", "counted").exit_code == 0
    assert {v.gpu_mode for v in load_trace_scenario(out).file.variants} == {"counted"}
    bad = _excerpt(tmp_path / "d.yaml", "--gpus", "counted", "--gpu-sharing")
    assert bad.exit_code == 2 and "counted GPUs cannot be shared" in bad.output
    suffix = _excerpt(tmp_path / "e.txt")
    assert suffix.exit_code == 2 and "expected a YAML file name" in suffix.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_paths_are_relative_to_the_written_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(EXCERPT, tmp_path / "trace")
    monkeypatch.chdir(tmp_path)
    result = _write("trace/pods.csv", "--nodes", "trace/nodes.csv", "--out", "deep/er/s.yaml")
    assert result.exit_code == 0, result.output
    trace = load_yaml(tmp_path / "deep" / "er" / "s.yaml")["workload"]["trace"]
    assert (trace["pods"], trace["nodes"]) == ("../../trace/pods.csv", "../../trace/nodes.csv")
    # through a symlinked folder a lexical `..` would lead elsewhere: the folders are resolved
    (tmp_path / "real" / "inside").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "inside")
    name = to_scenario.relative(tmp_path / "trace" / "pods.csv", tmp_path / "link")
    assert (tmp_path / "link" / name).resolve() == (tmp_path / "trace" / "pods.csv").resolve()


def test_a_scheduler_configuration_becomes_a_variant(tmp_path: Path) -> None:
    config = tmp_path / "configs" / "My_Scheduler.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump(SCHEDULER))
    out = tmp_path / "scenarios" / "s.yaml"
    result = _excerpt(out, "--variant", "default", "--scheduler-config", str(config))
    assert result.exit_code == 0, result.output
    ts = load_trace_scenario(out)
    assert [(v.name, v.scheduler.profile, v.scheduler.config) for v in ts.file.variants] == \
        [("default", "default", None), ("my-scheduler", None, "../configs/My_Scheduler.yaml")]
    assert ts.scheduler_configs == {"default": {}, "my-scheduler": {"percentageOfNodesToScore": 50, **PACKING}}


def test_the_document_is_built_without_reading_anything(tmp_path: Path) -> None:
    variants = to_scenario.variant_choices(["packing"], [tmp_path / "cfg" / "Fast Sched.yaml"])
    doc = to_scenario.scenario_doc(name="x", pods=tmp_path / "t" / "p.csv", nodes=tmp_path / "t" / "n.csv",
                                   base=tmp_path / "s", demand=2, seeds=[3], variants=variants, gpus="counted",
                                   gpu_sharing=False, options=DumpOptions(daemonsets=True))
    assert doc == {
        "name": "x", "cluster": {"profile": "scale"},
        "workload": {"trace": {"pods": "../t/p.csv", "nodes": "../t/n.csv", "mode": "paper", "demand": 2.0,
                               "seeds": [3]}},  # a CSV trace: the dump's options do not apply
        "variants": [{"name": "packing", "scheduler": {"profile": "packing"}, "gpus": "counted", "gpu_sharing": False},
                     {"name": "fast-sched", "scheduler": {"config": "../cfg/Fast Sched.yaml"}, "gpus": "counted",
                      "gpu_sharing": False}]}
    assert [v.name for v in to_scenario.variant_choices([], [])] == ["default", "packing"]
    assert yaml.safe_load(to_scenario.scenario_text(doc, "# a\n")) == doc
    assert to_scenario.dns_label("My_Trace v2") == "my-trace-v2" and to_scenario.dns_label("__") == "trace"


def test_a_written_file_that_is_refused_is_removed_with_its_folder(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({**SCHEDULER, "clientConnection": {"qps": 5}}))
    out = tmp_path / "new" / "folder" / "s.yaml"
    result = _excerpt(out, "--scheduler-config", str(config))
    assert result.exit_code == 1
    assert f"the scenario written was refused, so {out} was removed" in result.output
    assert "variants[0].scheduler.config" in result.output and "clientConnection: is the run's own" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.yaml"]
    # a folder that was there stays, and so does what else is in it
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    assert _excerpt(tmp_path / "kept" / "s.yaml", "--scheduler-config", str(config)).exit_code == 1
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("what", ["file", "folder", "dangling link"])
def test_an_existing_out_is_never_changed(tmp_path: Path, what: str) -> None:
    out = tmp_path / "s.yaml"
    if what == "file":
        out.write_bytes(b"name: theirs\r\n# not ours\x00\n")
    elif what == "folder":
        out.mkdir()
    else:
        out.symlink_to(tmp_path / "nowhere.yaml")
    before = out.read_bytes() if what == "file" else None
    result = _excerpt(out)
    assert result.exit_code == 1
    assert f"{out} exists: not overwritten" in result.output
    if what == "file":
        assert out.read_bytes() == before
    elif what == "folder":
        assert out.is_dir() and not list(out.iterdir())
    else:
        assert out.is_symlink() and not (tmp_path / "nowhere.yaml").exists()
    with pytest.raises(to_scenario.WriteRefused, match="exists: not overwritten"):
        to_scenario.write_scenario(out, {"name": "x"})


def test_a_bad_trace_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text((EXCERPT / "pods.csv").read_text().replace("name,cpu_milli,", "name,cpu_mili,", 1))
    out = tmp_path / "new" / "s.yaml"
    result = _write(str(pods), "--nodes", str(EXCERPT / "nodes.csv"), "--out", str(out))
    assert result.exit_code == 1
    assert f"{pods}:1:2: cpu_mili: unknown column (did you mean 'cpu_milli'?)" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pods.csv"]


def test_a_bad_name_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    result = _excerpt(tmp_path / "new" / "s.yaml", "--name", "Not_A_Label")
    assert result.exit_code == 1 and "nothing written" in result.output and "name: expected" in result.output
    assert not list(tmp_path.iterdir())


def test_a_dump_goes_through_with_how_it_was_read(tmp_path: Path) -> None:
    out = tmp_path / "cluster.yaml"
    result = _write(str(DUMP), "--out", str(out), "--model-label", "nvidia.com/gpu.product", "--daemonsets",
                    "--gpus", "counted")
    assert result.exit_code == 0, result.output
    ts = load_trace_scenario(out)
    trace: dict[str, Any] = load_yaml(out)["workload"]["trace"]
    assert "nodes" not in trace and _same_file(out, trace["pods"], DUMP)
    assert (trace["model_label"], trace["daemonsets"]) == ("nvidia.com/gpu.product", True)
    assert "gpu_resource" not in trace and "share_annotation" not in trace  # the defaults are not repeated
    dumped = read_trace(DUMP, None, DumpOptions(model_label="nvidia.com/gpu.product", daemonsets=True))
    assert (ts.trace.nodes, ts.trace.pods, ts.trace.notes) == (dumped.nodes, dumped.pods, dumped.notes)
    assert "4 nodes (17 GPUs)" in result.output


def test_the_cluster_profiles_are_the_scenarios() -> None:
    for profile in to_scenario.CLUSTER_PROFILES:
        assert validate(TraceClusterSpec, {"profile": profile}, "t").profile == profile
    with pytest.raises(SpecError, match="expected one of default, scale"):
        validate(TraceClusterSpec, {"profile": "huge"}, "t")
