#!/usr/bin/env bash
# make setup: idempotent, and installs only what the calling command needs.
#   EXTRAS=""             (default) the core: what `make scale-test` on scenarios/default.yaml needs; no PyTorch
#   EXTRAS=distill        + PyTorch, numpy and the Fashion-MNIST images (`make bench-distill`)
#   EXTRAS=dev,distill    + test and lint tools and chromium: everything `make test` needs
#   SCENARIO=FILE         + what that scenario needs, asked of it once the core venv exists
#                           (`hollowscale setup --for FILE --print-needs`): real nodes, Kueue, PyTorch
#   REAL_NODES=1          + containerd, runc, the CNI plugins, busybox-static and gcc from Debian, and the
#                           kubelet built beside the control plane (`cluster up --real-nodes N`); default 0
#   KUEUE=1               + Kueue (`cluster up --kueue`); default 0
#   JOBSET=1              + JobSet (`cluster up --jobset`); default 0
#   CONTROL_PLANE=0       no control-plane binaries (the distillation bench alone runs no cluster)
#   GO_ONLY=1             only the Go step: find a Go >= 1.26, else fetch the pinned one into the cache, say
#                           which, and stop (tests/integration/test_go_toolchain.py)
# Steps (a second run with the same settings checks and builds nothing: seconds):
#   1. Debian packages the settings need (installed with apt only when missing)
#   2. the virtual environment with hollowscale[EXTRAS] (reinstalled only when pyproject.toml changes
#      or extras not installed yet are asked for; one stamp per pyproject.toml hash and extras set)
#   3. the control-plane binaries, built with Go >= 1.26 from the Go module proxy and cached outside
#      the repo; a machine without that Go gets the pinned toolchain from the same proxy, into the same
#      cache (checked first, before the venv: hollowscale/gotoolchain.py)
# Real nodes and Kueue run only as root; a user who is not root gets one note saying so, and a
# SCENARIO that needs root stops here.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="${EXTRAS:-}"
CONTROL_PLANE="${CONTROL_PLANE:-1}"
KUEUE="${KUEUE:-0}"
JOBSET="${JOBSET:-0}"
REAL_NODES="${REAL_NODES:-0}"
SCENARIO="${SCENARIO:-}"
GO_ONLY="${GO_ONLY:-0}"
PYTHON="${PYTHON:-python3}"
STEP=0
step() { STEP=$((STEP + 1)); printf '\033[1m[setup %s/%s]\033[0m %s\n' "$STEP" "$TOTAL" "$1"; }
die() { printf 'error: %s\n' "$1" >&2; exit 1; }

# Extras as a sorted, de-duplicated, comma-separated set ("" = core only).
normalise() { tr ', ' '\n\n' <<<"$1" | sed '/^$/d' | sort -u | paste -sd, -; }
check_extras() {
  EXTRAS="$(normalise "$EXTRAS")"
  local extra
  for extra in ${EXTRAS//,/ }; do
    case "$extra" in
      dev|distill) ;;
      *) die "unknown extra '$extra' (known: dev, distill)" ;;
    esac
  done
}
has_extra() { [[ ",$EXTRAS," == *",$1,"* ]]; }
is_root() { [ "$(id -u)" -eq 0 ]; }

# apt_install PKG...: install those not installed yet; as a user who is not root, through sudo.
apt_install() {
  local missing=() pkg
  command -v dpkg-query >/dev/null || die "setup installs Debian packages with apt, and this system has no dpkg: install $* yourself, then rerun"
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    echo "  all present"
    return
  fi
  echo "  installing: ${missing[*]}"
  local sudo=()
  if ! is_root; then
    command -v sudo >/dev/null || die "installing the Debian packages ${missing[*]} needs root, and $(id -un) is not root and has no sudo: run \`apt-get install ${missing[*]}\` as root, then rerun"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The Go toolchain the build uses (hollowscale/gotoolchain.py, run with this Python before the venv exists:
# standard library only): the first of PATH's go and /usr/local/go/bin/go (go.dev's install dir, which a
# non-login PATH may lack; $HOLLOWSCALE_GO_SEARCH replaces that list) that is >= 1.26; else the pinned
# golang.org/toolchain fetched earlier into the cache; else fetched now through the Go module proxy (GOPROXY),
# checked against the SHA-256 in hollowscale/versions.py. Put first on PATH for `hollowscale setup`; the
# fetched one runs as itself (GOTOOLCHAIN=local, no GOROOT of another Go).
check_go() {
  local out go origin
  command -v "$PYTHON" >/dev/null || die "no Python interpreter at '$PYTHON' (set PYTHON to a python3 >= 3.11)"
  out="$("$PYTHON" -m hollowscale.gotoolchain)" || exit 1
  { read -r go; read -r origin; } <<<"$out"
  [ -x "$go" ] || die "hollowscale.gotoolchain answered '$out', not a go command"
  export PATH="${go%/*}:$PATH"
  if [ "$origin" != found ]; then
    export GOTOOLCHAIN=local
    unset GOROOT
  fi
}

# `python -m venv` needs ensurepip, which Debian's python3.X ships in its own package python3.X-venv;
# other interpreters (pyenv's, python.org's) carry it.
ensure_venv_support() {
  "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null && return
  local version prefix
  version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    || die "no Python interpreter at '$PYTHON' (set PYTHON to a python3 >= 3.11)"
  prefix="$("$PYTHON" -c 'import sys; print(sys.base_prefix)')"
  if [ "$prefix" = /usr ]; then
    echo "  $PYTHON is Debian's Python $version, without ensurepip: adding python$version-venv"
    apt_install "python$version-venv"
  fi
  "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null \
    || die "$PYTHON (Python $version in $prefix) cannot create a virtual environment (no ensurepip module): install Debian's python$version-venv, or set PYTHON to an interpreter that has venv and ensurepip"
}

# The venv with hollowscale[EXTRAS]. A stamp .venv/.installed-<hash>-<extras> says: this pyproject.toml
# was installed with these extras (pip never uninstalls, so what an earlier run of the same hash
# installed is still there).
venv_step() {
  local hash installed stamp wanted_missing extra union tag
  hash="$(sha256sum pyproject.toml | cut -c1-16)"
  if [ ! -x .venv/bin/python ]; then
    ensure_venv_support
    rm -f .venv/.installed-*
    "$PYTHON" -m venv .venv
  elif ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    # an earlier `python -m venv` that stopped before pip (ensurepip missing): complete it in place
    ensure_venv_support
    echo "  .venv has no pip (an earlier creation stopped half-way): completing it"
    rm -f .venv/.installed-*
    "$PYTHON" -m venv .venv
  fi
  installed=""
  for stamp in .venv/.installed-"$hash"-*; do
    [ -f "$stamp" ] || continue
    installed="$installed,${stamp##*/.installed-"$hash"-}"
  done
  installed="$(normalise "${installed//+/,}")"
  installed="${installed//core/}"; installed="$(normalise "$installed")"
  wanted_missing=""
  for extra in ${EXTRAS//,/ }; do
    [[ ",$installed," == *",$extra,"* ]] || wanted_missing="$wanted_missing,$extra"
  done
  if ! compgen -G ".venv/.installed-$hash-*" >/dev/null || [ -n "$wanted_missing" ]; then
    union="$(normalise "$installed,$EXTRAS")"
    case ",$union," in
      *,distill,*) echo "  installing hollowscale[$union] (first time: a few minutes; PyTorch brings ~5 GB)" ;;
      *) echo "  installing hollowscale${union:+[$union]} (first time: about a minute, ~0.3 GB; no PyTorch)" ;;
    esac
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install --progress-bar on -e ".${union:+[$union]}"
    rm -f .venv/.installed-*
    tag="${union//,/+}"
    touch ".venv/.installed-$hash-${tag:-core}"
  else
    echo "  up to date"
  fi
}

check_extras
TOTAL=$([ "$CONTROL_PLANE" = 0 ] && echo 2 || echo 3)
[ -n "$SCENARIO" ] && TOTAL=$((TOTAL + 1))

if ! is_root; then
  echo "note: running as $(id -un), not root: real nodes and Kueue need root (containerd, runc and the kubelet make mounts, network namespaces and a bridge; Kueue runs in a private mount namespace), so the tests marked 'root' and scenarios with real_nodes, kueue or distill_jobs run only as root; without root, \`make scale-test\` (scenarios/default.yaml) and \`make unit\` work."
fi
if [ "$CONTROL_PLANE" != 0 ] || [ "$GO_ONLY" = 1 ]; then
  check_go  # before minutes of pip: the build at the end needs it
fi
[ "$GO_ONLY" = 1 ] && exit 0

if [ -n "$SCENARIO" ]; then
  step "what $SCENARIO needs (read with the core .venv)"
  [ -f "$SCENARIO" ] || die "no scenario file $SCENARIO"
  venv_step
  needs="$(.venv/bin/hollowscale setup --for "$SCENARIO" --print-needs)"
  needs_root=0
  for kv in $needs; do
    case "$kv" in
      REAL_NODES=1) REAL_NODES=1 ;;
      KUEUE=1) KUEUE=1 ;;
      JOBSET=1) JOBSET=1 ;;
      EXTRAS=?*) EXTRAS="$EXTRAS,${kv#EXTRAS=}" ;;
      ROOT=1) needs_root=1 ;;
    esac
  done
  check_extras
  if [ "$needs_root" = 1 ] && ! is_root; then
    die "$SCENARIO needs root (real nodes, Kueue or kind), and $(id -un) is not root: run it as root; without root, \`make scale-test\` runs scenarios/default.yaml"
  fi
fi

# prometheus: every scale test; dataset-fashion-mnist: the distillation engine's images;
# chromium: the tests look at HTML reports headless.
APT_PACKAGES=(prometheus)
has_extra distill && APT_PACKAGES+=(dataset-fashion-mnist)
has_extra dev && APT_PACKAGES+=(chromium)
# real nodes: a containerd per kubelet, runc, the bridge/host-local/loopback CNI plugins, busybox for images,
# gcc + libc6-dev for the static pause program of the sandbox image (hollowscale/images/pause.py), ip;
# for the tests, iptables: the real-node test checks that a cluster's down leaves iptables as it was
if [ "$REAL_NODES" = 1 ] && [ "$CONTROL_PLANE" != 0 ]; then
  APT_PACKAGES+=(containerd runc containernetworking-plugins busybox-static iproute2 gcc libc6-dev)
  has_extra dev && APT_PACKAGES+=(iptables)
fi

step "Debian packages: ${APT_PACKAGES[*]}"
apt_install "${APT_PACKAGES[@]}"

step "Python virtual environment (.venv): hollowscale${EXTRAS:+[$EXTRAS]}"
venv_step

if [ "$CONTROL_PLANE" = 0 ]; then
  exit 0
fi
what="Kubernetes, etcd"
args=()
if [ "$REAL_NODES" = 1 ]; then what="$what, the kubelet"; args+=(--kubelet); fi
if [ "$KUEUE" = 1 ]; then what="$what, Kueue"; args+=(--kueue); fi
if [ "$JOBSET" = 1 ]; then what="$what, JobSet"; args+=(--jobset); fi
step "control-plane binaries ($what) from the Go module proxy"
.venv/bin/hollowscale setup "${args[@]}"
