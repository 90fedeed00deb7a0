"""Run test code in a fresh interpreter (importable because pytest puts tests/ on sys.path).

Locust imports gevent and monkey-patches the standard library (ssl, socket) on import; in the test
process, after ssl was imported by other tests, that ends in a RecursionError.  Code that imports
Locust runs here instead, and reports by its exit status and what it prints.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -c code`` from the repository root; its exit status, stdout and stderr."""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
