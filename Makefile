# The two commands a fresh machine needs (README): `make run` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Extra options for the platform, e.g. `make run PLATFORM_ARGS=--any-port`.
PLATFORM_ARGS ?=

.PHONY: run test lint faults bench system-packages jvm-archive

# Python writes bytecode caches (gitignored __pycache__/) even where the environment says not
# to (PYTHONDONTWRITEBYTECODE=1 on our machines): without them every process compiles our
# packages again, and every pytest worker rewrites the tests' asserts again, 10 s of its
# 21 s of CPU collecting the suite (tests/README.md). An empty value counts as unset.
export PYTHONDONTWRITEBYTECODE :=

run: $(STAMP)
	$(PY) manage.py platform $(PLATFORM_ARGS)

# Three pytest-xdist workers on the two cores (the suite waits more than it computes: JVM
# starts, micro-batch triggers, collector intervals), each taking a whole test file at a time
# (module fixtures such as a platform or a 3-broker cluster are started once), the longest
# first and the files on the local Spark session together (tests/conftest.py,
# tests/README.md "Running on three workers"). TEST_WORKERS=0: serial.
TEST_WORKERS ?= 3

test: $(STAMP) system-packages
	$(MAKE) --no-print-directory -j2 lint jvm-archive
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

# The longer randomized fault schedule against a 3-broker cluster (FAULTS_SEED, FAULTS_ROUNDS),
# the stream query's windowed counts across a killed driver and a restarted worker, and
# across a killed broker and a killed and restarted platform (issue 21's "done when"),
# and a MirrorSource whose target cluster is killed for 40 s mid-copy.
faults: $(STAMP)
	$(PY) -m pytest -m faults tests/cluster tests/controlcenter/streams tests/connect/test_mirror_outage.py -s

# The HTTP benchmark (bench/http_bench.py) drives the servers with wrk, a Debian package.
bench: $(STAMP)
	@command -v wrk >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
	$(PY) bench/http_bench.py

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy .
	$(VENV)/bin/lint-imports

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The Spark classes' CDS archive every test JVM maps (tests/jvmarchive.py): made once per
# JDK, venv and JVM options (a minute of one JVM), about half of each later JVM start's CPU.
# `make test` makes it beside the lint (mypy is one core, the archive's job mostly another).
jvm-archive: $(STAMP)
	$(PY) -m tests.jvmarchive

# Test peers from Debian, installed as root: kcat (a librdkafka CLI for conformance) and
# chromium (driven by Playwright in the browser tests; never `playwright install`).
system-packages:
	@command -v kcat >/dev/null && command -v chromium >/dev/null || { \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat chromium; }
