# titan-cpp: `make train` and `make test` are the two commands of README.md. After any build,
# build/bin/titan is the program, build/python the project's Python, build/bin/torchrun its
# torchrun (scripts/torchrun.py) and build/bin/hf its Hugging Face CLI.
# TITAN_PYTHON=python3 builds against that interpreter's torch and skips set-up
# (the GPU machine has no package registries); TITAN_CUDA=ON builds the CUDA pieces.
SHELL := bash
BUILD_DIR ?= build
TITAN_CUDA ?= OFF
JOBS ?= $(shell nproc)
TITAN_PYTHON ?=
TITAN_DEPS_PREFIX ?=

ifeq ($(TITAN_PYTHON),)
PYTHON := $(CURDIR)/.venv/bin/python
SETUP := setup
else
PYTHON := $(shell command -v $(TITAN_PYTHON))
SETUP :=
endif

# ccache must be told to accept precompiled headers.
# Relative paths in the ccache keys let fresh clones (CI) reuse the cache of earlier builds.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE ?= 8G

.PHONY: all setup build build-cuda sanitized fuzz train test unit integration format bench clean

all: build

setup:
	@scripts/setup

# ccache is looked up when the recipe runs, after set-up has installed it: looked up when make
# reads this file, a fresh machine's first build would have none and the next build a
# different compiler launcher, which recompiles everything.
build: $(SETUP)
	@mkdir -p $(BUILD_DIR)
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=$$(command -v ccache) -DTITAN_PYTHON_EXE=$(PYTHON) \
	  -DTITAN_CUDA=$(TITAN_CUDA) -DTITAN_DEPS_PREFIX=$(TITAN_DEPS_PREFIX) > $(BUILD_DIR)/configure.log 2>&1 || { cat $(BUILD_DIR)/configure.log; exit 1; }
	@cmake --build $(BUILD_DIR) -j $(JOBS)
	@printf '#!/bin/sh\nexec "%s" "$$@"\n' "$(PYTHON)" > $(BUILD_DIR)/python && chmod +x $(BUILD_DIR)/python
	@printf '#!/bin/sh\n# torchrun of the Python titan is built with, passing Ctrl-C and SIGTERM to the workers\n# and showing rank 0'"'"'s progress line (scripts/torchrun.py)\nexec "%s" "%s/scripts/torchrun.py" "$$@"\n' "$(PYTHON)" "$(CURDIR)" > $(BUILD_DIR)/bin/torchrun && chmod +x $(BUILD_DIR)/bin/torchrun
	@printf '#!/bin/sh\n# the Hugging Face CLI of the Python titan is built with (README.md: hf download)\nexec "%s" -m huggingface_hub.cli.hf "$$@"\n' "$(PYTHON)" > $(BUILD_DIR)/bin/hf && chmod +x $(BUILD_DIR)/bin/hf

# The H200's architecture by default: torch otherwise asks the GPU, and there may be none (the
# CUDA sources also compile on a CPU-only machine with nvcc and a CUDA build of torch).
build-cuda:
	TORCH_CUDA_ARCH_LIST=$${TORCH_CUDA_ARCH_LIST:-9.0a} $(MAKE) build TITAN_CUDA=ON

train: build
	@scripts/run_train.sh

unit: build sanitized
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	@cd $(BUILD_DIR)/sanitized && ctest --output-on-failure -j $(JOBS)

# The parsers and torch-free unit tests under ASan + UBSan, and the libFuzzer targets
# (tests/sanitized/CMakeLists.txt, built with clang; docs/fuzzing.md).
sanitized: $(SETUP)
	@mkdir -p $(BUILD_DIR)/sanitized
	@CXX=clang++ cmake -S tests/sanitized -B $(BUILD_DIR)/sanitized -G Ninja \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=$$(command -v ccache) -DTITAN_PYTHON_EXE=$(PYTHON) \
	  > $(BUILD_DIR)/sanitized/configure.log 2>&1 || { cat $(BUILD_DIR)/sanitized/configure.log; exit 1; }
	@cmake --build $(BUILD_DIR)/sanitized -j $(JOBS)

# Each fuzz target (or those named in FUZZ_TARGETS) for FUZZ_SECONDS (default 600), FUZZ_JOBS at
# a time; a table of executions and crashes goes to build/sanitized/fuzz/results.md.
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= $(JOBS)
fuzz: sanitized
	@scripts/fuzz $(BUILD_DIR)/sanitized $(FUZZ_SECONDS) $(FUZZ_JOBS)

# A full run writes tens of GB of checkpoints and exports under pytest's temporary folders;
# only the failed tests' folders are kept afterwards.
integration: build
	@$(BUILD_DIR)/python -m pytest tests/integration -q -n $(JOBS) -o tmp_path_retention_policy=failed

test: unit integration

format:
	@git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

bench: build
	@$(BUILD_DIR)/python bench/cpu_tokens_per_second.py

clean:
	rm -rf $(BUILD_DIR)
