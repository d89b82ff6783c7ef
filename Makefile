# Every target does its own set-up: a fresh machine needs nothing but python3 (>= 3.10).
# The CPU torch wheel (torch==2.13.0) is installed first, so no dependency can pull a CUDA build.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
PYTEST_ARGS ?= -m "not slow and not wheel"

FASHION_MNIST := /usr/share/datasets/fashion-mnist

.PHONY: setup demo test test-all test-vision lint format bench fashion-mnist chromium clean \
	gpu-wheels gpu-check wheel-check docs docs-test

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
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# The slow end-to-end tests too (every reproduction in --quick mode).
test-all:
	$(MAKE) test PYTEST_ARGS=

# The package as users install it: python -m build, then the wheel (not editable) in a fresh venv
# beside this venv's torch, its --version, every public module imported, demo --quick.
wheel-check: $(STAMP)
	$(BIN)/python -m pytest -p no:xdist -m wheel tests/packaging/test_wheel.py

# The documentation site (docs/, issue 39) into docs/_build/html, strict: every warning is an
# error and every cross-reference resolves; examples/*.py run on the way (4 minutes from clean
# on two busy cores). Its tools are the `docs` extra, installed beside the venv's own.
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[docs]" "$(TORCH)"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/sphinx-build -W --keep-going -n -b html docs docs/_build/html

# The built site in headless Chromium (tests/docs), which fails rather than skips without it.
docs-test: docs chromium
	CLUSTERABLE_DOCS_REQUIRED=1 $(BIN)/python -m pytest -p no:xdist tests/docs

# The tests that need torchvision or timm (pretrained backbones: a ResNet-18 fine-tuned from a
# photo folder, the transforms of their data configs), in a venv of its own: PyPI's torchvision
# does not import beside the CPU torch wheel, so this one takes torch 2.14.1 with torchvision
# 0.29.1 (a CUDA build, 5.5 GB, which runs on the CPU too; on this machine both lie on disk and
# install in about a minute). Opt-in: too large for every run of `make test`.
VISION_VENV := .venv-vision
VISION_STAMP := $(VISION_VENV)/.installed
VISION_TORCH := torch==2.14.1 torchvision==0.29.1
VISION_TESTS := tests/train/test_recipe_backbones.py tests/data/test_transforms.py tests/test_run_seams.py \
	tests/test_configs.py

$(VISION_STAMP): pyproject.toml
	test -x $(VISION_VENV)/bin/python || $(PYTHON) -m venv $(VISION_VENV)
	$(VISION_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VISION_VENV)/bin/python -m pip install --quiet $(VISION_TORCH) timm
	$(VISION_VENV)/bin/python -m pip install --quiet -e ".[dev]" $(VISION_TORCH)
	touch $(VISION_STAMP)

test-vision: $(VISION_STAMP)
	$(VISION_VENV)/bin/python -c "import torchvision, timm"
	$(VISION_VENV)/bin/python -m pytest -n 2 -rs $(VISION_TESTS)

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
	rm -rf $(VENV) $(VISION_VENV) .pytest_cache .ruff_cache

# ---- GPU check (issue 27): `make gpu-wheels` here, then `make gpu-check` on a machine with a CUDA
# GPU whose python3 already holds torch (benchmarks/README.md, "GPU check").
# The packages that machine's image lacks, pinned to the versions .venv has; SQLAlchemy 2.1 no
# longer requires greenlet, and every other dependency (numpy, scipy, scikit-learn, packaging,
# PyYAML, tqdm, typing-extensions, MarkupSafe, torch) is in the image. sybil and numpydoc are the
# test suite's (tests/test_docs_examples.py, tests/test_docstrings.py: without them step b cannot
# collect those two modules); numpydoc.docscrape needs none of its Sphinx.
GPU_WHEELS := faiss-cpu==1.15.1 openTSNE==1.0.4 pymanopt==2.2.1 optuna==5.0.0 alembic==1.20.1 \
	SQLAlchemy==2.1.9 Mako==1.4.3 colorlog==6.12.0 pytorch-metric-learning==2.9.0 sybil==10.1.0 \
	numpydoc==1.11.0
GPU_PLATFORMS := $(foreach p,manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 \
	manylinux1,--platform $(p)_x86_64)
GPU_SITE := /tmp/site

# Wheels for Python 3.12 on x86-64 Linux, into .whl/ (ignored by git); run where pip reaches PyPI.
gpu-wheels:
	rm -rf .whl
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
		--implementation cp $(GPU_PLATFORMS) -d .whl $(GPU_WHEELS)
	@du -ch .whl/*.whl | tail -1

# On the GPU machine, with its own python3 (never .venv: that holds the CPU torch wheel).
gpu-check:
	@python3 -c "import importlib.util as u, sys; u.find_spec('torch') or sys.exit('gpu-check: \
	python3 has no torch here; run it on the GPU machine'); import torch; torch.cuda.is_available() \
	or sys.exit('gpu-check: torch ' + torch.__version__ + ' sees no CUDA GPU here; run it on a \
	machine with one')"
	@if [ -d .whl ]; then \
		python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
			--target $(GPU_SITE) .whl/*.whl || exit 1; \
	fi
	PYTHONPATH=src:$(GPU_SITE) python3 benchmarks/gpu_check.py $(GPU_CHECK_ARGS)
