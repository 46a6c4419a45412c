# Everything a newcomer or CI runs; see README.md.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: quickstart test lint unit bench install install-test native conformance inference-conformance

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Envoy dynamic modules (src/lychgate/native): plain C against Envoy's ABI, no headers
# needed. Without a C compiler lychgate runs without them (CEL computes the scope key).
CC     ?= cc
NATIVE := src/lychgate/native/liblychgate_scope.so

$(NATIVE): src/lychgate/native/lychgate_scope.c
	@if command -v $(CC) >/dev/null 2>&1; then \
	  $(CC) -O2 -shared -fPIC -Wall -Wextra -Werror -o $@ $<; \
	else echo "warning: no C compiler ($(CC)): $@ not built; split route tables use CEL keys"; fi

native: $(NATIVE)

install: $(BIN)/python $(NATIVE)
	$(BIN)/pip install --quiet -e .

install-test: $(BIN)/python $(NATIVE)
	$(BIN)/pip install --quiet -e '.[test]'
	@# xds-protos ships an old copy of opentelemetry/proto (no scope_logs) at the same paths as
	@# opentelemetry-proto, and whichever installs last wins: the OTLP receivers of the tests
	@# need opentelemetry-proto's (at the version pyproject.toml pins), so it is written last.
	$(BIN)/pip install --quiet --no-deps --force-reinstall "$$($(BIN)/pip freeze | grep -i '^opentelemetry-proto==')"

# Install, start the echo backend and serve examples/quickstart (Ctrl-C stops all).
quickstart: install
	bash scripts/quickstart.sh $(BIN)

lint: install-test
	$(BIN)/ruff check src tests tools
	$(BIN)/mypy

# The whole suite: lint, types, unit, golden, Helm and end-to-end tests with real Envoy.
test: lint
	$(BIN)/pytest

unit: install-test
	$(BIN)/pytest -m "not e2e"

# Gateway API conformance (v1.6.1) against one lychgate; rewrites docs/conformance.md
# and docs/conformance-report.yaml. Needs shared/gateway-api beside the work tree.
conformance: install-test
	$(BIN)/python -m tests.conformance

# Inference Extension conformance (v1.6.0) against one lychgate; rewrites
# docs/inference-conformance-report.yaml. Needs shared/inference-extension beside the work tree.
inference-conformance: install-test
	$(BIN)/python -m tests.inference_conformance
