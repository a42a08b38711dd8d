# The two commands: `make demo` and `make test`. Each sets up its own venv on first use:
# .venv-demo holds only what the demo runs (the server and client extras), .venv the
# whole dev toolchain; neither touches the other, so they work in either order.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_VENV := .venv-demo
DEMO_BIN := $(DEMO_VENV)/bin
DEMO_STAMP := $(DEMO_VENV)/.installed

.PHONY: test demo docs docs-serve lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[all,dev,docs]'
	touch $(STAMP)

$(DEMO_STAMP): pyproject.toml
	test -x $(DEMO_BIN)/python || $(PY) -m venv $(DEMO_VENV)
	$(DEMO_BIN)/python -m pip install -q --disable-pip-version-check -e '.[server,client]'
	touch $(DEMO_STAMP)

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
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # not --quiet: it hides warnings from --strict

# Serve the built site on this machine, as search needs (links work opened from disk too);
# PORT=N serves on another port.
PORT ?= 8000
docs-serve: docs  # make docs-serve PORT=8001 serves on another port
	$(BIN)/python -m http.server $(PORT) --bind 127.0.0.1 --directory site

demo: $(DEMO_STAMP)
	$(DEMO_BIN)/python examples/demo.py

bench: $(STAMP)
	$(BIN)/python benchmarks/wire.py

clean:
	rm -rf .typecheck build dist site *.egg-info
