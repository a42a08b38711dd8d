# The two commands: `make demo` and `make test`. Both set up .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo docs lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[all,dev,docs]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check protocol server client tests examples benchmarks mkdocs_hooks.py
	$(BIN)/ruff format --check protocol server client tests examples benchmarks mkdocs_hooks.py

.typecheck/evalport:
	mkdir -p .typecheck/evalport
	ln -sfn ../../protocol .typecheck/evalport/protocol
	ln -sfn ../../server .typecheck/evalport/server
	ln -sfn ../../client .typecheck/evalport/client

typecheck: $(STAMP) .typecheck/evalport
	$(BIN)/mypy -p evalport.protocol -p evalport.server -p evalport.client

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck docs pytest

# The documentation site: sources in docs/, built strictly into site/ (git-ignored).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

demo: $(STAMP)
	$(BIN)/python examples/demo.py

bench: $(STAMP)
	$(BIN)/python benchmarks/wire.py

clean:
	rm -rf .typecheck build dist site *.egg-info
