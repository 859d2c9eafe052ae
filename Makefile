# Tidings: two commands. `make run` starts the broker; `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CORE   := $(VENV)/.core
STAMP  := $(VENV)/.installed
KERNELS := $(VENV)/.kernels
HOST   ?= 127.0.0.1
PORT   ?= 8080
DATA   ?= ./.tidings

.PHONY: run test lint typecheck bench clean prereqs constraints fuzz

run: $(CORE) $(KERNELS)
	$(BIN)/tidings serve --host $(HOST) --port $(PORT) --data-dir $(DATA)

test: $(STAMP) $(KERNELS)
	@scripts/check-prereqs.sh --tests
	$(BIN)/python -m pytest -q -n 2

# schemathesis over every operation of /openapi.json, many examples each (the suite runs 5)
FUZZ_EXAMPLES ?= 200
fuzz: $(STAMP)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/api/test_schemathesis.py

# ruff, and the house's import rules (docs/architecture.md; contracts in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy src/tidings

prereqs:
	@scripts/check-prereqs.sh

# The broker alone, at the exact versions of constraints.txt: what `make run` needs (Python;
# no Java, ZooKeeper or Tesseract: the parts that need them say so when used).
$(CORE): pyproject.toml constraints.txt
	@scripts/check-prereqs.sh --core
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[fast]'
	touch $(CORE)

# The matching kernels compiled once into numba's disk cache (seconds of CPU), here rather
# than in a broker's first minutes or a benchmark's first run; again when their source changes.
$(KERNELS): $(CORE) src/tidings/matching/kernels.py
	$(BIN)/python -c 'from tidings.matching.kernels import warm_up; warm_up()'
	touch $(KERNELS)

# Everything (every extra, the dev tools, the system packages the tests use).
$(STAMP): $(CORE) scripts/check-prereqs.sh
	@scripts/check-prereqs.sh
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

# After changing a range in pyproject.toml: resolve again, then review the diff.
constraints:
	$(BIN)/python -m pip install -q --upgrade -e '.[all,dev]'
	@{ sed -n '1,2p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable \
	  | LC_ALL=C sort -f; } > constraints.txt.new && mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build src/*.egg-info
