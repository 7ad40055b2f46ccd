# Two entry points, both self-contained on a fresh machine: `make demo`, `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench eval clean

$(BIN)/python:
	@$(PY) -m venv $(VENV) 2>/dev/null || python3 -m venv $(VENV)

# -qq: pip's and setuptools' chatter (the editable-install banner) stays out of `make demo`;
# a failing install still prints its error.
$(STAMP): $(BIN)/python pyproject.toml
	@echo "Installing reme-agent and its dependencies into $(VENV) (first run only)..."
	@$(BIN)/pip install -qq --upgrade pip
	@$(BIN)/pip install -qq -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/reme-agent demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python bench/bench_index.py

eval: $(STAMP)
	$(BIN)/reme-agent eval --dataset all

clean:
	rm -rf $(VENV) build *.egg-info
