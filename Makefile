# hollowscale: the two commands a fresh machine needs are `make scale-test` and `make test`.
# Each installs only what it needs: `make scale-test` the core (no PyTorch, no real-node packages)
# plus what its SCENARIO asks for, `make test` everything the suite needs (extras dev and distill,
# real nodes, Kueue); see scripts/setup.sh. Prerequisites: Debian 12 and Python >= 3.11; setup uses a
# Go >= 1.26 from PATH or fetches the pinned one into hollowscale's cache (hollowscale/gotoolchain.py).
SHELL := /bin/bash
# Go may live outside a non-login PATH (CI), or be the toolchain setup fetched into the cache; the Go build needs it.
GO_FETCHED_BIN := $(shell python3 -m hollowscale.gotoolchain --bin-dir 2>/dev/null)
export PATH := $(PATH):/usr/local/go/bin$(if $(GO_FETCHED_BIN),:$(GO_FETCHED_BIN)):$(HOME)/go/bin
VENV := .venv
PY := $(VENV)/bin/python
HS := $(VENV)/bin/hollowscale
PYTEST_ARGS ?=

.PHONY: setup setup-test setup-distill setup-unit test test-e2e test-flakes lint lint-only unit integration scale-test bench bench-cluster bench-hollow bench-loadgen \
        bench-distill bench-batch bench-scaling bench-plan bench-dra bench-trace bench-gang-profile bench-topology bench-faults kind-node-image kind-up cluster-up cluster-down clean nightly plan

KUEUE ?= 0
REAL_NODES ?= 0
# a scenario file: `make setup SCENARIO=F` adds what F needs; `make scale-test` runs F (default below)
SCENARIO ?=

setup: ## the core: venv without PyTorch, prometheus, control-plane binaries (idempotent); KUEUE=1 adds Kueue, REAL_NODES=1 real-node packages and the kubelet, SCENARIO=F what F needs
	@SCENARIO=$(SCENARIO) KUEUE=$(KUEUE) REAL_NODES=$(REAL_NODES) bash scripts/setup.sh

setup-test: ## everything the test suite needs: core + extras dev,distill, chromium, Fashion-MNIST, real-node packages and the kubelet, Kueue, JobSet
	@EXTRAS=dev,distill KUEUE=1 JOBSET=1 REAL_NODES=1 bash scripts/setup.sh

setup-distill: ## what `hollowscale distill` needs: core + PyTorch, Fashion-MNIST (no control plane)
	@EXTRAS=distill CONTROL_PLANE=0 bash scripts/setup.sh

lint: setup-test lint-only ## ruff and mypy on our code

lint-only:
	$(VENV)/bin/ruff check kubecore hollowscale hollow loadgen distill tests
	$(VENV)/bin/mypy kubecore hollowscale hollow loadgen distill

test: ## the suite in timed phases: setup, lint, unit, integration (what .ci/run runs; budget 30 min warm)
	@TIER=ci PYTEST_ARGS="$(PYTEST_ARGS)" bash scripts/test.sh

test-e2e: ## the long end-to-end scenarios (marker e2e), timed; run before resolving an issue that touches them
	@TIER=e2e PYTEST_ARGS="$(PYTEST_ARGS)" bash scripts/test.sh

setup-unit: ## what the unit tests need: the venv with the dev and distill extras (no control plane, no root)
	@EXTRAS=dev,distill CONTROL_PLANE=0 bash scripts/setup.sh

unit: setup-unit ## the unit tests: start no process (enforced), need no cluster
	$(VENV)/bin/pytest -ra -m "not integration" $(PYTEST_ARGS)

test-flakes: setup-unit ## the unit tier N times (default 20), each with its own random seed and test order; names every test that failed at least once (not part of .ci/run) -> reports/flakes/
	$(PY) tests/flakes.py --rounds $(or $(N),20)

integration: setup-test ## the integration tier of make test (real local control plane), without the e2e scenarios
	$(VENV)/bin/pytest -ra -m "integration and not e2e" $(PYTEST_ARGS)

scale-test: ## run SCENARIO (default scenarios/default.yaml) after setting up what it needs (real nodes, Kueue, PyTorch only when it asks); CLUSTER=kind runs it on a kind cluster built here; report in reports/latest/
	@SCENARIO=$(or $(SCENARIO),scenarios/default.yaml) KUEUE=$(KUEUE) REAL_NODES=$(REAL_NODES) HOLLOWSCALE_CLUSTER=$(CLUSTER) bash scripts/setup.sh
	$(HS) run $(or $(SCENARIO),scenarios/default.yaml)$(if $(CLUSTER), --cluster $(CLUSTER))

nightly: setup ## scenarios/nightly/set.yaml -> reports/nightly/<date>/; exit 1 on a regression vs NIGHTLY_BASELINE (NIGHTLY_UPDATE_BASELINE=1: make it)
	$(PY) -m hollowscale.nightly

plan: setup ## capacity plan of scenarios/plan-small.yaml (2 sizes x bisection on rate, ~12 min) -> reports/plan/plan-small/capacity.{json,md,html}
	$(HS) plan scenarios/plan-small.yaml --out reports/plan/plan-small

cluster-up: setup
	$(HS) cluster up

cluster-down: ## stop the default local cluster (no cluster there: says so, exit 0)
	@$(HS) cluster down || { rc=$$?; [ $$rc = 3 ] || exit $$rc; }

bench-cluster: setup ## cluster up/down medians -> reports/bench/cluster.json
	$(PY) tests/bench/bench_cluster.py --runs 5 --out reports/bench/cluster.json

bench-hollow: setup ## hollow vs KWOK tuned: 10,000 GPU nodes + 5,000 pods per mode, 3 repeats, fresh control plane each (~45 min) -> reports/bench/hollow.json
	$(VENV)/bin/pip install -q 'py-spy>=0.3'  # the agent's CPU profile per phase
	$(PY) tests/bench/bench_hollow.py

bench-loadgen: setup ## Locust job creates/s (scale profile) and collector throughput -> reports/bench/loadgen.json
	$(PY) tests/bench/bench_loadgen.py

bench-distill: setup-distill ## pure / same-net / service distillation, 3 seeds -> reports/bench/distill.json (~20 min)
	$(HS) distill bench --out reports/distill-bench
	cp reports/distill-bench/summary.json reports/bench/distill.json
	cp reports/distill-bench/summary.md reports/bench/distill.md

bench-batch: setup-test ## Kueue's highest sustainable job rate with 1, 4 and 16 ClusterQueues and what binds, beside Kueue's own perf test (~30 min) -> reports/bench/batch.json
	$(PY) tests/bench/bench_batch.py

bench-plan: setup ## the small plan over both profiles and with the controller-manager's client limit moved, what binds at each knee (~40 min) -> reports/bench/plan-small.json
	$(PY) tests/bench/bench_plan.py run profiles reports/plan/bench-profiles
	$(PY) tests/bench/bench_plan.py run limits reports/plan/bench-limits
	$(PY) tests/bench/bench_plan.py write reports/plan/bench-profiles reports/plan/bench-limits

bench-dra: setup ## scheduler pods/s for counted GPUs vs DRA claims vs a CEL selector vs memory shares at 500 and 5,000 nodes (scheduler_perf's 5000pods shape, upstream beside it), registration of 10,000 nodes with and without slices and kube-apiserver's profile of it; 3 repeats per control plane (hours) -> reports/bench/dra.json
	$(PY) tests/bench/bench_dra.py

bench-trace: setup ## Alibaba's GPU trace through the real scheduler: default and packing profiles x DRA shares and counted GPUs, 3 seeds each, on the 1,213 GPU nodes (hours) -> reports/bench/trace.json
	$(PY) tests/bench/bench_trace.py

bench-scaling: setup ## agents per 1,000 hollow nodes and per pod transition, one agent's saturation under a CPU limit, control-plane cost per node, agent pods for 5,000/15,000 nodes (~20 min, root) -> reports/bench/scaling.json
	$(PY) tests/bench/bench_scaling.py

bench-gang-profile: setup ## where kube-scheduler's CPU goes under in-tree gang scheduling: CPU profiles and queue metrics of the gang, gang without SchedulerPopFromBackoffQ and default variants of gang-contention (~15 min) -> reports/bench/gang-profile.json
	$(PY) tests/bench/bench_gang_profile.py

bench-topology: setup-test ## gangs placed by topology per variant: Kueue TAS on Kueue's perf shape, 2,560 / 5,120 nodes, a preemption-heavy mix, in-tree TAS at 5,000 nodes, registration with and without labels; medians of 3 (hours) -> reports/bench/topology.json
	$(PY) tests/bench/bench_topology.py

bench-faults: setup-test ## training gangs through pod crashes and lost nodes at 1,000 and 5,000 GPU nodes: Job per-index vs JobSet Recreate vs BlockingRecreate vs Kueue's requeue; recovery p50/p99, GPU-hours wasted, ETTR; medians of 3 (hours) -> reports/bench/faults.json
	$(PY) tests/bench/bench_faults.py

bench: bench-cluster bench-hollow bench-loadgen bench-distill bench-batch bench-scaling bench-plan bench-dra bench-trace bench-gang-profile bench-topology bench-faults

kind-node-image: setup ## the kind node image built here (no registry), loaded into hollowscale's podman
	$(PY) -m hollowscale kind node-image

kind-up: ## a kind cluster for users with Docker (not used by the tests)
	kind create cluster --name hollowscale --config kind-config.yaml

clean:
	-$(HS) cluster down
	rm -rf .pytest_cache .mypy_cache .ruff_cache
