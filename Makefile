# OneValet: the two commands of the README.
#
#   make run    start the whole server (web + websockets, Celery worker and beat, embedded Redis)
#   make test   run the test suite; extra pytest arguments go in ARGS, e.g. make test ARGS='-m smoke'
#
# Both first make sure .venv exists and holds this project's dependencies. The stamp file is
# newer than pyproject.toml once they are installed, so later runs reuse the environment and
# only a change of pyproject.toml triggers a reinstall.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.onevalet-installed
ARGS ?=

.PHONY: run test venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --disable-pip-version-check -q -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/python manage.py serve

# ONEVALET_VAR_DIR defaults to var/test so a test run never touches the var/ of `make run`.
test: $(STAMP)
	ONEVALET_VAR_DIR="$${ONEVALET_VAR_DIR:-var/test}" $(VENV)/bin/pytest $(ARGS)
