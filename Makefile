# Every target creates the virtual environment itself on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STACK ?= canary

.PHONY: plan test bench constraints venv clean e2e e2e-tools

PIP := $(BIN)/python -m pip --disable-pip-version-check

# Pins: direct dependencies in pyproject.toml, every transitive one in constraints.txt.
$(BIN)/gpu-rollout: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet pip==26.3
	$(PIP) install --quiet -c constraints.txt -e '.[test]'
	touch $@

venv: $(BIN)/gpu-rollout

# The offline preview of the canary stack with its policy report: no cloud, no Pulumi CLI. The example stacks
# are judged by their own pack configs (policy/examples/: the example key's trust, scoped to the example prod
# stacks), which no configuration a team deploys with holds.
plan: venv
	GPU_ROLLOUT_PACK_CONFIG_DIR=policy/examples $(BIN)/gpu-rollout plan --stack $(STACK)

# Python 3.13, the newest the README promises: on PATH, else a pyenv install of it; empty where the machine
# has none. `make test-py313` runs the whole fast tier on it, in a virtual environment of its own.
PYTHON313 ?= $(shell for p in python3.13 $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.13*/bin/python3.13); do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null && { echo $$p; break; }; done)

.PHONY: test-py313 print-python313
print-python313:
	@echo $(PYTHON313)

test-py313:
	@test -n "$(PYTHON313)" || { echo "make test-py313: no Python 3.13 on this machine" >&2; exit 2; }
	$(MAKE) test PYTHON=$(PYTHON313) VENV=.venv-py313

# Gates before the tests: lint (ruff), the layering (import contracts in pyproject.toml), types (mypy).
test: venv prometheus
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -n auto -q

# Debian's Prometheus 2.42 (prometheus, promtool) for the verify tests (tests/prometheus): the package is
# downloaded by apt and unpacked into .tools/prometheus, no root needed (apt's lists once: apt-get update).
PROMETHEUS := .tools/prometheus/usr/bin/prometheus
.PHONY: prometheus
prometheus: $(PROMETHEUS)

$(PROMETHEUS):
	rm -rf .tools/prometheus .tools/deb && mkdir -p .tools/deb
	cd .tools/deb && (apt-get download prometheus || (apt-get update -qq && apt-get download prometheus))
	dpkg-deb -x .tools/deb/prometheus_*.deb .tools/prometheus && rm -rf .tools/deb
	$(PROMETHEUS) --version >/dev/null && touch $@

# The attestations the example prod stacks ship (attestations/<canary>/<driver>.json): `gpu-rollout verify` of
# each example canary stack against the test cluster (fake API server, loopback model servers, the Prometheus
# above), soaked as long as its prod stack's promotion.minSoakHours asks. Re-run after changing a canary stack.
.PHONY: attest-examples
attest-examples: venv prometheus
	$(BIN)/python -m scripts.attest_examples

# A local cluster to try preflight, watch, pause and verify on (scripts/sandbox.py): the fast tier's fake API
# server seeded from the canary stack file STACK (default canary) after its upgrade, with the Prometheus above;
# its kubeconfig in .sandbox/. Serves until Ctrl-C.
.PHONY: sandbox
sandbox: venv prometheus
	$(BIN)/python -m scripts.sandbox --stack $(STACK)

# The e2e tier (docs/e2e.md): builds whatever is missing of the Pulumi CLI, the Kubernetes provider, etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kwok from the pinned Go modules in e2e/tools
# into e2e/bin (needs Go and the Go module proxy), then runs tests/e2e against a control plane on loopback.
e2e: venv e2e-tools
	$(BIN)/python -m pytest -q tests/e2e

e2e-tools:
	e2e/build.sh

# The policy pack as `pulumi policy publish` takes it: a self-contained folder with its own requirements
# (policy/bundle.py; docs/policies.md, "Publishing the pack and setting enforcement per stack"). Publish from
# a folder no .gitignore above ignores: `make policy-pack POLICY_PACK_DIR=$HOME/gpu-driver-upgrade-pack`.
POLICY_PACK_DIR ?= build/policy-pack
.PHONY: policy-pack
policy-pack: venv
	$(BIN)/python -m policy.bundle $(POLICY_PACK_DIR)

# How preflight scales with the fleet (API calls and seconds at 10, 100 and 1,000 nodes; then preflight, verify and
# simulate --from-cluster reading 1k, 3k and 10k nodes of 8 pods each: seconds and peak memory) and how the offline
# plan scales (seconds and peak memory at 3, 50 and 150 pools, and the prod example against the SDK imports, each with
# a cold and a warm cache of renderings); what a
# diff of the four example stacks costs against one plan of the prod stack; the simulator on 100, 1,000 and 10,000
# nodes (seconds and peak memory); verify over a week of soak of a 50-node canary against a backfilled Prometheus;
# the cluster side of `fleet status` over 5, 10 and 20 clusters of 500 GPU nodes each (seconds and peak memory).
bench: venv prometheus
	$(BIN)/python -m benchmarks.checks_scale
	$(BIN)/python -m benchmarks.plan_scale
	$(BIN)/python -m benchmarks.diff_scale
	$(BIN)/python -m benchmarks.simulate_scale
	$(BIN)/python -m benchmarks.verify_soak
	$(BIN)/python -m benchmarks.fleet_scale
	$(BIN)/python -m benchmarks.guard_scale

# The config reference from the model (fleetspec/reference.py): docs/config.md and the JSON Schema of a stack file,
# docs/schemas/stack-config.schema.json; and the JSON Schema of each verb's --json document (rollout/schemas.py),
# docs/schemas/<verb>.schema.json. Run after changing a config field or a document; the tests fail while any is stale.
.PHONY: docs
docs: venv
	$(BIN)/python -m scripts.config_docs
	$(BIN)/python -m scripts.json_schemas

# Re-pin every transitive dependency after a change to pyproject.toml.
constraints:
	rm -rf .venv-pins && $(PYTHON) -m venv .venv-pins
	.venv-pins/bin/python -m pip install --quiet pip==26.3 && .venv-pins/bin/python -m pip install --quiet -e '.[test]'
	(head -2 constraints.txt; .venv-pins/bin/python -m pip freeze --exclude-editable) > constraints.txt.new
	mv constraints.txt.new constraints.txt && rm -rf .venv-pins

clean:
	rm -rf $(VENV) .venv-py313 .pytest_cache .hypothesis
