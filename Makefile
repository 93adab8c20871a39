# Entry points for people and CI. Every target that needs the set-up runs it first; it is
# idempotent and takes a few seconds once everything is in place.
BUILD ?= build
PYTHON := .venv/bin/python
BENCH_PYTHON := .venv-bench/bin/python
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
# Extra flags for `make run`, e.g. make run ARGS="--port 18080" (--host, --config, ...).
ARGS ?=
# pytest: -rs lists every skipped test with its reason (e.g. the QQP tests without the data).
PYTEST_ARGS ?= -q -rs
# What pytest runs: the whole integration suite unless narrowed, e.g. to one file.
PYTEST_PATHS ?= tests/python
# Unit tests at once: one per core (436 tests: 82 s one at a time, 49 s with 2, on 2 cores).
CTEST_JOBS ?= $(shell nproc)
export TAILCUT_BUILD_DIR := $(abspath $(BUILD))

.PHONY: setup setup-server build run embed-sample test unit-test py-test bench-engine bench bench-quick bench-tail bench-setup format clean \
        fuzz fuzz-smoke sanitize

# The set-up with the whole build (server, unit tests, benchmarks).
setup:
	scripts/setup.sh --build-dir $(BUILD)

# The set-up with only the server binary built (what run, embed-sample and bench-engine need).
setup-server:
	scripts/setup.sh --build-dir $(BUILD) --target tailcut

build: setup

# The main job: the server with the default model on http://127.0.0.1:8080 (Ctrl-C stops it).
# Builds only the server; flags in ARGS, e.g. make run ARGS="--port 18080".
run: setup-server
	$(BUILD)/tailcut serve --model-repository models $(ARGS)

# Embed a sample text with the default model, without a server.
embed-sample: setup-server
	$(BUILD)/tailcut embed "tailcut keeps P99 latency under the SLO."

test: setup
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j $(CTEST_JOBS)
	$(PYTHON) -m pytest $(PYTEST_ARGS) $(PYTEST_PATHS)

unit-test:
	cd $(BUILD) && ctest --output-on-failure

py-test:
	$(PYTHON) -m pytest $(PYTEST_ARGS) $(PYTEST_PATHS)

bench-engine: setup-server
	$(BUILD)/tailcut bench-engine

# Side-by-side benchmark (BENCHMARKS.md): tailcut, the Python stacks and the engine ceiling on
# the same workloads. Writes bench/results/<date>.json, plots, and the generated section of
# docs/benchmarks/side-by-side.md. About 20 minutes; bench-quick about 3. Extra options:
# BENCH_ARGS="--systems ...".
bench: bench-setup
	$(BENCH_PYTHON) bench/run_bench.py --command "make bench" $(BENCH_ARGS)

# Tail latency against offered rate (docs/benchmarks/embeddings.md, "Tail latency on natural
# traffic"): the natural workload, three interleaved repeats per rate, overload at 1.25x, plot.
# About 15 minutes. Options: BENCH_ARGS="--workloads natural,short --variant 'w1=--threads 2'".
bench-tail: bench-setup
	$(BENCH_PYTHON) bench/tail_bench.py $(BENCH_ARGS)

bench-quick: bench-setup
	$(BENCH_PYTHON) bench/run_bench.py --quick --command "make bench-quick" $(BENCH_ARGS)

# The benchmark's own Python environment (.venv-bench) and workloads (bench/workloads/).
bench-setup: setup
	bench/setup.sh

# Sanitizer builds (build-asan/, build-tsan/: clang, ASan+UBSan and TSan) and their tests;
# CI runs this after `make test`.
sanitize: setup
	scripts/ci_sanitizers.sh

# libFuzzer targets in $(FUZZ_BUILD)/fuzz/ (clang, ASan+UBSan); docs/fuzzing.md. With
# TAILCUT_WERROR=1 in the environment (CI) warnings are errors.
fuzz:
	scripts/setup.sh --no-build
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
	  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
	  -DTAILCUT_FUZZ=ON -DTAILCUT_BUILD_TESTS=OFF -DTAILCUT_BUILD_BENCH=OFF \
	  $(if $(TAILCUT_WERROR),-DTAILCUT_WERROR=$(TAILCUT_WERROR)) >/dev/null
	cmake --build $(FUZZ_BUILD) --parallel --target fuzz_targets

# Each fuzz target for FUZZ_SECONDS on its corpus, after replaying its regressions.
fuzz-smoke: fuzz
	FUZZ_BUILD=$(abspath $(FUZZ_BUILD)) scripts/fuzz_smoke.sh $(FUZZ_SECONDS)

format:
	find src tests bench fuzz -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
