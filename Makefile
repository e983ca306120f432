# The two commands a fresh machine needs (README): `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test setup system-packages lint

run: setup
	$(PY) manage.py platform

test: setup lint
	$(PY) -m pytest

lint:
	$(PY) -m ruff check .
	$(PY) -m mypy .
	$(VENV)/bin/lint-imports

setup: $(STAMP) system-packages

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# kcat is a conformance peer; chromium drives the browser tests. Debian packages, as root.
system-packages:
	@command -v kcat >/dev/null && command -v chromium >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat chromium; }
