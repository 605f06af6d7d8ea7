# Every target creates the virtual environment itself on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STACK ?= canary

.PHONY: plan test venv clean

$(BIN)/gpu-rollout: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

venv: $(BIN)/gpu-rollout

# The offline preview of the canary stack with its policy report: no cloud, no Pulumi CLI.
plan: venv
	$(BIN)/gpu-rollout plan --stack $(STACK)

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n auto -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
