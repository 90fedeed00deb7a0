# hollowscale: the two commands a fresh machine needs are `make scale-test` and `make test`.
SHELL := /bin/bash
# Go may live outside a non-login PATH (CI); the Go build needs it.
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin
VENV := .venv
PY := $(VENV)/bin/python
HS := $(VENV)/bin/hollowscale
PYTEST_ARGS ?=

.PHONY: setup test lint unit integration scale-test bench bench-cluster bench-hollow bench-loadgen \
        bench-distill kind-up cluster-up cluster-down clean

setup: ## venv, Debian packages, control-plane binaries (idempotent)
	@bash scripts/setup.sh

lint: setup ## ruff and mypy on our code
	$(VENV)/bin/ruff check hollowscale hollow loadgen distill tests
	$(VENV)/bin/mypy hollowscale hollow loadgen distill

test: setup lint ## the whole test suite (unit + integration against the real local control plane)
	$(VENV)/bin/pytest -ra $(PYTEST_ARGS)

unit: setup
	$(VENV)/bin/pytest -ra -m "not integration" $(PYTEST_ARGS)

integration: setup
	$(VENV)/bin/pytest -ra -m integration $(PYTEST_ARGS)

scale-test: setup ## run scenarios/default.yaml on the local cluster; report in reports/latest/
	$(HS) run scenarios/default.yaml

cluster-up: setup
	$(HS) cluster up

cluster-down:
	$(HS) cluster down

bench-cluster: setup ## cluster up/down medians -> reports/bench/cluster.json
	$(PY) tests/bench/bench_cluster.py --runs 5 --out reports/bench/cluster.json

bench-hollow: setup ## 10,000 GPU nodes + 20,000 pods, hollow vs KWOK (scale profile) -> reports/bench/hollow.json
	$(PY) tests/bench/bench_hollow.py

bench-loadgen: setup ## Locust job creates/s (scale profile) and collector throughput -> reports/bench/loadgen.json
	$(PY) tests/bench/bench_loadgen.py

bench-distill: setup ## pure / same-net / service distillation, 3 seeds -> reports/bench/distill.json (~20 min)
	$(HS) distill bench --out reports/distill-bench
	cp reports/distill-bench/summary.json reports/bench/distill.json
	cp reports/distill-bench/summary.md reports/bench/distill.md

bench: bench-cluster bench-hollow bench-loadgen bench-distill

kind-up: ## a kind cluster for users with Docker (not used by the tests)
	kind create cluster --name hollowscale --config kind-config.yaml

clean:
	-$(HS) cluster down
	rm -rf .pytest_cache .mypy_cache .ruff_cache
