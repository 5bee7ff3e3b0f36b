# Two commands matter: `make run` and `make test`. Everything they need is
# installed here, into .venv/, from a machine that has only Python 3.11+.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export PORT
# The docs site's own port, so `make docs` runs beside `make run`.
DOCS_PORT ?= 8001

.PHONY: run test browser install install-dev lint format typecheck migrations-check ci bench fuzz soak stop status clean keys docs docs-check

# requirements-local.txt: the runtime ones plus the embedded engines (not in the image).
$(VENV)/.installed: requirements.txt requirements-local.txt
	@echo "== creating the virtualenv in $(VENV)/"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@echo "== installing the dependencies (requirements-local.txt: the service and the embedded engines; about a minute the first time)"
	@$(PY) -m pip install --quiet -r requirements-local.txt
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	@echo "== installing the test and lint tools (requirements-dev.txt)"
	@$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

## Fresh machine → migrated database, demo account, web + worker + beat on $(PORT).
run: install
	$(PY) -m dev.run

## Fresh machine → the whole suite on real PostgreSQL and Redis.
## The back office's browser tests (tests/browser/) drive Debian's chromium with Playwright:
## installed here when missing (browser builds cannot be downloaded from Playwright's servers).
test: install-dev browser
	$(PY) -m pytest $(PYTEST_ARGS)

browser:
	@command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null 2>&1 \
	  || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1) \
	  || sudo -n apt-get install -y -q chromium >/dev/null 2>&1 \
	  || echo "make test: chromium is missing and could not be installed (not root, no password-less sudo):" \
	     "the browser tests will be skipped (and fail under CI=true). Debian/Ubuntu: sudo apt-get install chromium." >&2

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: install-dev
	$(VENV)/bin/mypy .

migrations-check: install-dev
	DJANGO_SETTINGS_MODULE=config.settings.local $(PY) manage.py makemigrations --check --dry-run

## The documentation site (docs/, mkdocs.yml) on http://127.0.0.1:$(DOCS_PORT)/, rebuilt on every save.
docs: install-dev
	$(VENV)/bin/mkdocs serve -a 127.0.0.1:$(DOCS_PORT)

## The site built as CI builds it: --strict turns a broken link, a missing anchor or a page
## left out of the nav into a failure. Built into a temporary directory, so nothing is left behind.
## Never --quiet: it hides the warnings from the count, and --strict then passes them.
docs-check: install-dev
	@site="$$(mktemp -d)"; $(VENV)/bin/mkdocs build --strict --site-dir "$$site"; rc=$$?; rm -rf "$$site"; exit $$rc

## Every benchmark against the service as deployed, each beside its ceiling
## measured in the same run (the API rows: wrk, ratio to a bare Django + DRF
## app, bench/anchor/), own database, bounded in time (bench/__main__.py).
bench: install-dev
	@command -v wrk >/dev/null || apt-get install -y -q wrk || sudo -n apt-get install -y -q wrk \
	  || echo "make bench: wrk is missing and could not be installed (not root, no password-less sudo):" \
	     "the API and isolation scenarios will be skipped. Install it (Debian/Ubuntu: sudo apt-get install wrk;" \
	     "macOS: brew install wrk) and run make bench again." >&2
	$(PY) -m bench

## Schemathesis (--checks all, fixed seed) against gunicorn as deployed, on its own database.
## FUZZ_ARGS="-- OPTIONS" passes options to schemathesis (.ci/run asks for a JUnit report).
fuzz: install-dev
	$(PY) -m tests.fuzz.run_schemathesis $(FUZZ_ARGS)

## Chaos soak: the service as deployed (every Procfile process) under mixed traffic while
## faults are injected on a seeded schedule, then invariants (tests/soak/). MINUTES=30 for
## a long run; SOAK_ARGS="--junit PATH" for a report (.ci/run asks for one).
MINUTES ?= 3
soak: install-dev
	$(PY) -m tests.soak --minutes $(MINUTES) $(SOAK_ARGS)

## The demo account's keys again (make run printed them at start), as
## shell comments and one export line: eval "$$(make -s keys)" sets them.
keys: install
	@$(PY) -m dev.keys

## Stop what make run started (web, workers, beat, honcho), then the embedded
## PostgreSQL and Redis (data stays in ./var).
stop: install
	$(PY) -m dev.stop

status: install
	$(PY) -m dev.embedded status

clean: stop
	rm -rf var
