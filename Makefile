# Quick start: `make demo` then `make test`.  Both create .venv on first use.
PY ?= python3
# pytest-xdist workers for `make test` (a test file stays on one worker: its module-level oracle runs
# are not repeated); the suite is sized for 2 cores
TEST_WORKERS ?= 2
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
DEMO_MODEL := refinterp/models/demo_int8.tflite
DEMO_DUMP := refinterp/models/demo_device_dump.npz

.PHONY: demo test check-wheel bench clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py | $(BIN)/python
	$(PIP) install -e '.[test]'
	touch $@ $(VENV)/.installed

# The main job on the model shipped in the package: compare LiteRT's XNNPACK run (the "device" dump, captured
# with tools/capture_demo_dump.py) against refinterp's bit-exact simulation of LiteRT's reference kernels.
# `--explain` then names the arithmetic the device used (best_scheme: tflite-xnnpack).
# `refinterp diff` exits 1 when tensors diverge, which is the expected finding here.
demo: $(VENV)/.installed
	@mkdir -p demo-out
	$(BIN)/refinterp diff $(DEMO_MODEL) --scheme tflite-reference --against $(DEMO_DUMP) \
		--explain --html demo-out/report.html --json demo-out/report.json; rc=$$?; \
		if [ $$rc -gt 1 ]; then exit $$rc; fi; echo "report: demo-out/report.html"

# The packaged wheel in a clean venv (schemes listed, demo diff, smoke run), then the suite.
# The aarch64 oracles (qemu user mode + the official aarch64 wheels) are built when the machine allows
# it (root with apt, or qemu already installed); otherwise the ARM64 tests skip and say why.
test: $(VENV)/.installed-test
	tools/check_wheel.sh $(BIN)/python
	$(BIN)/python tools/setup_arm64_env.py --install-system --if-possible
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile tests

check-wheel: $(VENV)/.installed
	tools/check_wheel.sh $(BIN)/python

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/run.py

clean-venv:
	rm -rf $(VENV)
