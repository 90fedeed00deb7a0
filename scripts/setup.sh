#!/usr/bin/env bash
# make setup: idempotent, and installs only what the calling command needs.
#   EXTRAS=""             (default) the core: what `make scale-test` needs; no PyTorch
#   EXTRAS=distill        + PyTorch, numpy and the Fashion-MNIST images (`make bench-distill`)
#   EXTRAS=dev,distill    + test and lint tools and chromium: everything `make test` needs
# Steps (a second run with the same extras checks and builds nothing: seconds):
#   1. Debian packages the extras need (installed with apt only when missing)
#   2. the virtual environment with hollowscale[EXTRAS] (reinstalled only when pyproject.toml changes
#      or extras not installed yet are asked for; one stamp per pyproject.toml hash and extras set)
#   3. the control-plane binaries, built from the Go module proxy and cached outside the repo
#      (CONTROL_PLANE=0 skips them: the distillation bench alone runs no cluster; KUEUE=1 adds Kueue,
#      which `cluster up --kueue` and the test suite need)
#   REAL_NODES=1 (default) also installs containerd, runc, the CNI plugins and busybox-static from Debian
#   and builds the kubelet beside the control plane (`cluster up --real-nodes N`, the test suite's real
#   node); REAL_NODES=0 skips both
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="${EXTRAS:-}"
CONTROL_PLANE="${CONTROL_PLANE:-1}"
KUEUE="${KUEUE:-0}"
REAL_NODES="${REAL_NODES:-1}"
step() { printf '\033[1m[setup %s]\033[0m %s\n' "$1" "$2"; }

# Extras as a sorted, de-duplicated, comma-separated set ("" = core only).
normalise() { tr ', ' '\n\n' <<<"$1" | sed '/^$/d' | sort -u | paste -sd, -; }
EXTRAS="$(normalise "$EXTRAS")"
for extra in ${EXTRAS//,/ }; do
  case "$extra" in
    dev|distill) ;;
    *) echo "error: unknown extra '$extra' (known: dev, distill)"; exit 2 ;;
  esac
done
has_extra() { [[ ",$EXTRAS," == *",$1,"* ]]; }

# prometheus: every scale test; dataset-fashion-mnist: the distillation engine's images;
# chromium: the tests look at HTML reports headless.
APT_PACKAGES=(prometheus)
has_extra distill && APT_PACKAGES+=(dataset-fashion-mnist)
has_extra dev && APT_PACKAGES+=(chromium)
# real nodes: a containerd per kubelet, runc, the bridge/host-local/loopback CNI plugins, busybox for images,
# gcc + libc6-dev for the static pause program of the sandbox image (hollowscale/images/pause.py)
[ "$REAL_NODES" = 1 ] && [ "$CONTROL_PLANE" != 0 ] && \
  APT_PACKAGES+=(containerd runc containernetworking-plugins busybox-static iproute2 gcc libc6-dev)
TOTAL=$([ "$CONTROL_PLANE" = 0 ] && echo 2 || echo 3)

step "1/$TOTAL" "Debian packages: ${APT_PACKAGES[*]}"
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

step "2/$TOTAL" "Python virtual environment (.venv): hollowscale${EXTRAS:+[$EXTRAS]}"
PYTHON="${PYTHON:-python3}"
hash="$(sha256sum pyproject.toml | cut -c1-16)"
# A stamp .venv/.installed-<hash>-<extras> says: this pyproject.toml was installed with these extras
# (pip never uninstalls, so what an earlier run of the same hash installed is still there).
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
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
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

if [ "$CONTROL_PLANE" = 0 ]; then
  exit 0
fi
if [ "$KUEUE" = 1 ]; then
  step "3/$TOTAL" "control-plane binaries (Kubernetes, etcd, Kueue) from the Go module proxy"
else
  step "3/$TOTAL" "control-plane binaries (Kubernetes, etcd) from the Go module proxy"
fi
command -v go >/dev/null || { echo "error: Go >= 1.26 is required (go not on PATH)"; exit 1; }
if [ "$KUEUE" = 1 ]; then
  .venv/bin/hollowscale setup --kueue
else
  .venv/bin/hollowscale setup
fi
if [ "$REAL_NODES" = 1 ]; then
  # the kubelet of the same version, built with the same wrapper module (cached beside the others)
  echo "  kubelet (real nodes): $(.venv/bin/python -m hollowscale.cluster.binaries --kubelet | tail -1)"
fi
