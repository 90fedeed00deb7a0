"""Click commands, mounted by the orchestrator as ``hollowscale distill ...``.

Import line for the main CLI: ``from distill.cli import distill_group``.

This module imports only ``click`` and the standard library, so ``hollowscale --help`` (and
``hollowscale distill --help``) work on an install without the ``distill`` extra; the commands
import PyTorch when they run, and without it exit 2 with one line saying what to install.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import time
from pathlib import Path

import click

#: what the ``distill`` extra adds to the core install (import names)
EXTRA_MODULES = ("torch", "numpy")
INSTALL_HINT = "pip install 'hollowscale[distill]' (or make setup-distill; make test installs it too)"


def missing_extra_modules() -> list[str]:
    """The modules of the ``distill`` extra that this interpreter cannot import."""
    return [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]


def _require_extra() -> None:
    """Exit 2 with one line when the ``distill`` extra is not installed."""
    missing = missing_extra_modules()
    if missing:
        click.echo(f"error: hollowscale distill needs {', '.join(missing)}: {INSTALL_HINT}", err=True)
        sys.exit(2)


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )


@click.group(name="distill")
def distill_group() -> None:
    """Knowledge distillation as a service (EDL style) on Fashion-MNIST.

    A CNN teacher serves soft labels over HTTP (python -m distill.teacher); a small
    student trains from a few labelled images plus teacher-labelled ones
    (python -m distill.student). `bench` measures pure vs same-net vs service training.
    """


@distill_group.command("train-teacher")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="checkpoint path (default ~/.cache/hollowscale/distill/teacher.pt, or $HOLLOWSCALE_CACHE)",
)
@click.option("--epochs", type=int, default=12, show_default=True, help="passes over the 60,000 training images")
@click.option("--threads", type=int, default=0, help="torch threads (default: all cores)")
@click.option("--force", is_flag=True, help="retrain even if the checkpoint exists")
@click.option("-v", "--verbose", is_flag=True)
def train_teacher_cmd(out: Path | None, epochs: int, threads: int, force: bool, verbose: bool) -> None:
    """Train the teacher CNN once (>= 91% test accuracy) and cache it outside the repo."""
    _require_extra()
    from distill.data import DatasetMissingError
    from distill.models import load_checkpoint
    from distill.train_teacher import TeacherTrainSettings, default_checkpoint, train_teacher

    _logging(verbose)
    path = out or default_checkpoint()
    if path.exists() and not force:
        meta = load_checkpoint(path).meta
        click.echo(f"teacher already trained: {path} (test accuracy {meta.get('test_accuracy')}); --force to retrain")
        return
    try:
        acc = train_teacher(path, TeacherTrainSettings(epochs=epochs, threads=threads))
    except DatasetMissingError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"teacher saved to {path}: test accuracy {acc:.4f}")
    if acc < 0.91:
        click.echo("warning: below the 91% target; retrain with more --epochs", err=True)


@distill_group.command("bench")
@click.option("--quick", is_flag=True, help="one seed, small split, short epochs: a few minutes on 2 cores")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="output directory (default reports/distill/<timestamp>)",
)
@click.option("--seeds", default=None, help="comma separated seeds (default 0,1,2; quick: 0)")
@click.option("--epochs", type=int, default=None, help="epochs per run (default 2)")
@click.option("--checkpoint", type=click.Path(path_type=Path), default=None, help="teacher checkpoint to use")
@click.option("-v", "--verbose", is_flag=True)
def bench_cmd(
    quick: bool, out: Path | None, seeds: str | None, epochs: int | None, checkpoint: Path | None, verbose: bool
) -> None:
    """Pure vs same-net vs service distillation (1, 2, 4 teachers, and a teacher killed and
    restarted mid-run): accuracy over seeds, student samples/s, ratios, beside EDL's table.

    On CPU the student is pinned to the first core and every teacher to the other core(s)
    (os.sched_setaffinity + torch.set_num_threads). Writes summary.json, summary.md and
    bench.png into --out.
    """
    import dataclasses

    _require_extra()
    from distill.bench import BenchSettings, render_markdown, run_bench
    from distill.data import DatasetMissingError

    _logging(verbose)
    out = out or Path("reports/distill") / time.strftime("%Y%m%d-%H%M%S")
    settings = BenchSettings.quick_settings(out) if quick else BenchSettings(out=out)
    changes: dict[str, object] = {}
    if seeds:
        changes["seeds"] = tuple(int(x) for x in seeds.split(","))
    if epochs:
        changes["epochs"] = epochs
    if checkpoint:
        changes["checkpoint"] = checkpoint
    settings = dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
    try:
        summary = run_bench(settings)
    except DatasetMissingError as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        click.echo("interrupted; teachers stopped", err=True)
        sys.exit(130)
    click.echo(render_markdown(summary))
    click.echo(f"written: {out}/summary.json, summary.md, bench.png")


def main() -> None:
    distill_group()


if __name__ == "__main__":
    main()
