# Every target does its own set-up: a fresh machine needs nothing but python3 (>= 3.10).
# The CPU torch wheel (torch==2.13.0) is installed first, so no dependency can pull a CUDA build.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
PYTEST_ARGS ?= -m "not slow"

FASHION_MNIST := /usr/share/datasets/fashion-mnist

.PHONY: setup demo test test-all lint format bench fashion-mnist chromium clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]" "$(TORCH)"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/clusterable demo

test: $(STAMP) fashion-mnist chromium
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# The slow end-to-end tests too (every reproduction in --quick mode).
test-all:
	$(MAKE) test PYTEST_ARGS=

# Real data for the Fashion-MNIST tests: Debian's package, where apt-get runs as root; elsewhere
# those tests skip and say why.
fashion-mnist:
	@if [ ! -d $(FASHION_MNIST) ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1; } || \
		echo "could not install dataset-fashion-mnist: its tests will skip"; \
	fi

# Headless Chromium for the HTML report's browser test: Debian's package, where apt-get runs as
# root (Playwright's Python client drives it and downloads no browser); elsewhere that test skips.
chromium:
	@if ! command -v chromium >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq chromium >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; } || \
		echo "could not install chromium: the report's browser test will skip"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_losses.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
