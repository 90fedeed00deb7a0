#!/usr/bin/env bash
# make test / make test-e2e: the suite in timed phases, so every change sees what it costs.
#   TIER=ci  (make test, what .ci/run runs):   setup, lint, unit, integration
#   TIER=e2e (make test-e2e):                  setup, teacher, kind-image, e2e (the long end-to-end scenarios)
# The budget (docs/tests.md): .ci/run <= 30 minutes on a machine whose caches `make setup-test` filled.
# Each phase's wall time is printed as it ends and all of them again at the end, failed run or not.
# PYTEST_ARGS is passed to every pytest phase.
set -uo pipefail
cd "$(dirname "$0")/.."

TIER="${TIER:-ci}"
PY=.venv/bin
PYTEST_ARGS="${PYTEST_ARGS:-}"
WORKERS="${WORKERS:-2}"  # pytest-xdist workers of the integration tier (WORKERS=0: one process)
# every test's global random state comes from one seed (tests/seeding.py): pinned here, so that CI draws the
# same every run; `make test-flakes` runs the unit tier under many seeds and shuffled orders instead
export HOLLOWSCALE_TEST_SEED="${HOLLOWSCALE_TEST_SEED:-1}"
# the slowest tests of each tier are printed: the first place to look when the budget tightens
DURATIONS="--durations=12 --durations-min=5"

names=()
secs=()
results=()
started_all=$(date +%s)

summary() {
  local total=$(( $(date +%s) - started_all ))
  printf '\n\033[1m[test] phase times (%s tier)\033[0m\n' "$TIER"
  for i in "${!names[@]}"; do
    printf '  %-12s %5ss  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
  done
  printf '  %-12s %5ss\n' "total" "$total"
}
trap summary EXIT

phase() {  # phase NAME CMD...: run CMD, time it, stop the tier at the first failure
  local name=$1; shift
  printf '\n\033[1m[test phase %s]\033[0m %s\n' "$name" "$*"
  local t0; t0=$(date +%s)
  "$@"
  local rc=$?
  names+=("$name"); secs+=($(( $(date +%s) - t0 ))); results+=("$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")")
  printf '\033[1m[test phase %s]\033[0m %ss, exit %s\n' "$name" "${secs[-1]}" "$rc"
  [ $rc = 0 ] || exit $rc
}

phase setup make --no-print-directory setup-test
case "$TIER" in
  ci)
    phase lint make --no-print-directory lint-only
    # shellcheck disable=SC2086
    phase unit $PY/pytest -ra -m "not integration" $DURATIONS $PYTEST_ARGS
    # two workers, each with its own session cluster: most integration tests wait on the control plane
    # rather than compute, so two streams nearly halve the tier (tests/conftest.py groups modules and
    # keeps every root test on one worker)
    # shellcheck disable=SC2086
    phase integration $PY/pytest -ra -n "$WORKERS" --dist loadgroup -m "integration and not e2e" $DURATIONS $PYTEST_ARGS
    ;;
  e2e)
    # what the e2e scenarios build once and cache, each in a timed phase of its own (nothing to do when
    # cached), so that no test's timeout pays for a fresh machine's caches: the bench's teacher checkpoint
    # that distill_jobs use (minutes of training on 2 cores: on a fresh machine the kind smoke test ran past
    # its 900 s training it) and kind's node image
    phase teacher $PY/hollowscale distill train-teacher
    phase kind-image $PY/python -m hollowscale kind node-image
    # shellcheck disable=SC2086
    phase e2e $PY/pytest -ra -m e2e $DURATIONS $PYTEST_ARGS
    ;;
  *) echo "unknown TIER=$TIER (ci or e2e)"; exit 2 ;;
esac
