# acp.nvim — every target creates .venv and installs the project on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Neovim: `make demo` uses the nvim on PATH when it is 0.10 or newer, else the
# Neovim 0.11.4 that the test extra installs into .venv; tests use the .venv one
# (NVIM_BIN=/path/to/nvim overrides it).
STAMP  := $(VENV)/.installed

.PHONY: help demo test fuzz lint doc gen check bench clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-6s %s\n", $$1, $$2}'

# editable_mode=strict: a plain path in a .pth, where the default editable finder
# cost every Python start ~30 ms. Its link tree misses modules added later; the host
# and the demo agent run the working tree through PYTHONPATH, so only other uses of
# .venv's python need `make clean` after adding one.
# compileall: bytecode now, so the host starts fast even under PYTHONDONTWRITEBYTECODE.
# --stamp: what :checkhealth acp compares with pyproject.toml (the steps are :AcpInstall's).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=strict
	$(PY) -m compileall -q acp_nvim
	$(PY) -m acp_nvim.health --stamp
	@touch $@

demo: $(STAMP) ## open Neovim with the plugin and the offline demo agent, chat open
	$(PY) scripts/demo.py

test: $(STAMP) ## run the whole test suite (unit + headless Neovim)
	$(PY) -m pytest $(ARGS)

# The fuzz profile (tests/unit/test_fuzz.py): over 10,000 generated cases, no per-test
# timeout (the cases have their own and a watchdog); failures are kept in .hypothesis/.
fuzz: $(STAMP) ## fuzz the client with 10,000+ generated agent outputs (minutes)
	ACP_FUZZ_PROFILE=fuzz $(PY) -m pytest tests/unit/test_fuzz.py --timeout=0 -q $(ARGS)

# mypy checks the test fakes too (named one by one: pyproject's exclude skips tests/
# when a folder is walked): they stand in for the Editor port and for real agents.
lint: $(STAMP) ## ruff and mypy --strict (the package and the test fakes)
	$(PY) -m ruff check acp_nvim scripts tests bench
	$(PY) -m mypy acp_nvim $(wildcard tests/fakes/*.py tests/fakes/*/*.py)

gen: $(STAMP) ## regenerate protocol types, lua/acp/defaults.lua and doc sections
	$(PY) scripts/gen_types.py
	$(PY) scripts/gen_presets.py
	$(PY) scripts/gen_defaults.py
	$(PY) scripts/gen_doc.py

doc: $(STAMP) ## regenerate lua/acp/defaults.lua, the generated sections of doc/acp.txt, and doc/tags
	$(PY) scripts/gen_defaults.py
	$(PY) scripts/gen_doc.py

check: $(STAMP) ## fail when generated files drift from their sources
	$(PY) scripts/gen_types.py --check
	$(PY) scripts/gen_presets.py --check
	$(PY) scripts/gen_defaults.py --check
	$(PY) scripts/gen_doc.py --check

bench: $(STAMP) ## benchmarks against a fast fake agent (not run in CI)
	$(PY) -m bench $(ARGS)

clean: ## remove the virtual environment (and its editable link tree) and caches
	rm -rf $(VENV) build .pytest_cache .ruff_cache .mypy_cache
