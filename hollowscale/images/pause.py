"""The pod sandbox's pause program: a few lines of C, compiled static.

Why our own: the sandbox image must be in containerd before any pod starts and no registry is
reachable. What the kubelet needs from it is small: PID 1 of the pod that sleeps until it is told to
stop (SIGINT or SIGTERM, exit 0) and reaps the zombies it inherits (a pod sharing its PID
namespace makes it everyone's parent).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

PAUSE_VERSION = "3.10"
CFLAGS = ("-static", "-O2", "-s", "-Wall", "-Werror")

PAUSE_C = r"""/* hollowscale pause: PID 1 of a pod sandbox. Sleeps until SIGINT/SIGTERM, reaps zombies. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { (void)sig; _exit(0); }

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        printf("hollowscale pause " VERSION "\n");
        return 0;
    }
    if (getpid() != 1) fprintf(stderr, "pause: warning: not running as PID 1\n");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
    for (;;) pause();
}
"""


class CompileError(RuntimeError):
    """The pause program did not compile; the message has the compiler's output and the fix."""


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if not gcc:
        raise CompileError("gcc is not on PATH: install it (`apt-get install -y gcc libc6-dev`) to build the pause image")
    return gcc


def fingerprint() -> str:
    """What the binary depends on: the source, the flags and the compiler's version."""
    version = subprocess.run([_gcc(), "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return hashlib.sha256("\0".join([PAUSE_C, PAUSE_VERSION, *CFLAGS, *version]).encode()).hexdigest()


def compile_pause(workdir: Path) -> Path:
    """Compile the pause program into ``workdir/pause`` (static, stripped) and return its path."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "pause.c"
    source.write_text(PAUSE_C)
    binary = workdir / "pause"
    proc = subprocess.run(
        [_gcc(), *CFLAGS, f'-DVERSION="{PAUSE_VERSION}"', "-o", str(binary), str(source)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        hint = " (a static link needs libc.a: `apt-get install -y libc6-dev`)" if "-lc" in proc.stderr else ""
        raise CompileError(f"gcc failed to build the pause program in {workdir}{hint}:\n{proc.stderr.strip()}")
    return binary
