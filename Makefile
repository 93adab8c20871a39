# Entry points for people and CI. Every target that needs the set-up runs it first; it is
# idempotent and takes a few seconds once everything is in place.
BUILD ?= build
PYTHON := .venv/bin/python
export TAILCUT_BUILD_DIR := $(abspath $(BUILD))

.PHONY: setup build run embed-sample test unit-test py-test bench-engine format clean

setup:
	scripts/setup.sh --build-dir $(BUILD)

build: setup

# The main job: the server with the default model on http://127.0.0.1:8080 (Ctrl-C stops it).
run: setup
	$(BUILD)/tailcut serve --model-repository models

# Embed a sample text with the default model, without a server.
embed-sample: setup
	$(BUILD)/tailcut embed "tailcut keeps P99 latency under the SLO."

test: setup
	cd $(BUILD) && ctest --output-on-failure --timeout 600
	$(PYTHON) -m pytest -q tests/python

unit-test:
	cd $(BUILD) && ctest --output-on-failure

py-test:
	$(PYTHON) -m pytest -q tests/python

bench-engine: setup
	$(BUILD)/tailcut bench-engine

format:
	find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
