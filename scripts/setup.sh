#!/usr/bin/env bash
# make setup: idempotent. A second run checks and builds nothing (seconds).
#   1. Debian packages the project needs (installed with apt only when missing)
#   2. the virtual environment with hollowscale installed (reinstalled only when pyproject.toml changes)
#   3. the control-plane binaries, built from the Go module proxy and cached outside the repo
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(prometheus dataset-fashion-mnist chromium)
step() { printf '\033[1m[setup %s]\033[0m %s\n' "$1" "$2"; }

step 1/3 "Debian packages: ${APT_PACKAGES[*]}"
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "  installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "  all present"
fi

step 2/3 "Python virtual environment (.venv)"
PYTHON="${PYTHON:-python3}"
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if [ ! -f "$stamp" ]; then
  echo "  installing hollowscale and its dependencies (first time: a few minutes, ~5 GB with torch)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install --progress-bar on -e '.[dev]'
  rm -f .venv/.installed-*
  touch "$stamp"
else
  echo "  up to date"
fi

step 3/3 "control-plane binaries (Kubernetes, etcd) from the Go module proxy"
command -v go >/dev/null || { echo "error: Go >= 1.26 is required (go not on PATH)"; exit 1; }
.venv/bin/hollowscale setup
