# `make demo` and `make test` do all set-up on a fresh machine (see README.md).
PYTHON ?= python3
# The job-view tests run real distributed PyTorch (CPU, gloo). 2.13.0 is the CPU build this
# workplace's machines carry on disk; any CPU build with gloo works (TORCH_SPEC="torch==2.9.1" ...).
TORCH_SPEC ?= torch==2.13.0
VENV   ?= .venv
PY      = $(VENV)/bin/python
BUILD   = tests/fixtures/build
CFLAGS  = -g -O0 -pthread -fno-omit-frame-pointer
C_SRC   = $(wildcard tests/fixtures/*.c)
CXX_SRC = $(wildcard tests/fixtures/*.cpp)
# lib*.c / lib*.cpp become shared libraries (for ctypes / extension fixtures); the rest executables.
LIB_SRC = $(filter tests/fixtures/lib%,$(C_SRC) $(CXX_SRC))
EXE_SRC = $(filter-out $(LIB_SRC),$(C_SRC) $(CXX_SRC))
EXES    = $(patsubst tests/fixtures/%,$(BUILD)/%,$(basename $(EXE_SRC)))
LIBS    = $(patsubst tests/fixtures/%,$(BUILD)/%.so,$(basename $(LIB_SRC)))
STRIPPED = $(addsuffix .stripped,$(EXES))

.PHONY: all install install-test fixtures pythons test demo lint bench clean

all: test

# Two steps, so that `make demo` installs only the tool (a few pure-Python wheels, seconds) and
# PyTorch (hundreds of MB) comes only with the targets that run it (test, bench, lint, fuzz).
# Quiet: pip at -q -q without its version check, and the build's own noise (setuptools' warnings,
# an index's "Location ... is ignored") in a log that is named only when the step fails.
PIP     = $(PY) -m pip -q -q --disable-pip-version-check
$(VENV)/.installed: pyproject.toml
	@echo "installing hanganalyze into $(VENV) (python venv, editable install)"
	@log=$$(mktemp -t hanganalyze-install.XXXXXX); \
	{ $(PYTHON) -m venv $(VENV) && $(PIP) install --upgrade pip && \
	  $(PIP) install -e . --config-settings editable_mode=compat && $(PY) scripts/src_paths.py; } >"$$log" 2>&1 \
	  || { echo "installing into $(VENV) failed; its output: $$log" >&2; exit 1; }; \
	rm -f "$$log"
	@touch $@

$(VENV)/.test-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	$(PY) scripts/src_paths.py  # pip wrote its .pth (the repository root) again: the two import folders
	$(PY) -m pip install -q '$(TORCH_SPEC)'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.test-installed

$(BUILD):
	mkdir -p $(BUILD)

$(BUILD)/%: tests/fixtures/%.c | $(BUILD)
	gcc $(CFLAGS) -o $@ $<

$(BUILD)/%: tests/fixtures/%.cpp | $(BUILD)
	g++ $(CFLAGS) -std=c++17 -o $@ $<

$(BUILD)/%.so: tests/fixtures/%.c | $(BUILD)
	gcc $(CFLAGS) -shared -fPIC -o $@ $<

$(BUILD)/%.so: tests/fixtures/%.cpp | $(BUILD)
	g++ $(CFLAGS) -std=c++17 -shared -fPIC -o $@ $<

$(BUILD)/%.stripped: $(BUILD)/%
	strip -o $@ $<

fixtures: $(EXES) $(LIBS) $(STRIPPED)

# CPython 3.8-3.13 (shared libpython, like pyenv's), 3.14, 3.14t, 3.13t (scripts/pythons.sh: built
# once per machine, ~/.cache/hanganalyze/pythons; the tests look there before pyenv).
# Exit 3 = some sources cannot be downloaded here: the tests report those builds as unavailable;
# any other failure stops `make test`.
pythons:
	bash scripts/pythons.sh || [ $$? -eq 3 ]

# Two workers, one test file each at a time (a file's module fixtures -- a hung job, a core -- are
# made once): most of the suite waits for real processes to hang, so two workers on two cores take
# ~60% of the serial time.
test: install-test fixtures pythons
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -n 2 --dist loadfile

# Only the fixture the demo runs (scripts/demo.sh), not all of them: the demo is meant to take under
# two minutes on a fresh machine.
# Quiet (one screen): the set-up runs silently (-s), its errors still show.
demo:
	@$(MAKE) -s --no-print-directory install $(BUILD)/cxx_thread_terminate
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash scripts/demo.sh

lint: install-test
	$(VENV)/bin/ruff check .

bench: install-test fixtures
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) bench/run.py

# The fuzzing campaign (issue 13): 8,800 seeded mutated cores, texts, snapshot JSONs and signature
# files; prints the counts; SEED=... SCALE=... to vary it.
fuzz: install-test fixtures
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" nice -n 19 $(PY) scripts/fuzz.py --seed $(or $(SEED),13) --scale $(or $(SCALE),1)

clean:
	rm -rf $(BUILD) report.html demo-out

# A library without unwind tables (.eh_frame removed) and stripped, as GPU driver libraries ship,
# called from a program with CFI: once with frame pointers, once without (issue 21).
NOCFI_FLAGS = -g -O2 -fno-asynchronous-unwind-tables -fno-unwind-tables -fno-optimize-sibling-calls -shared -fPIC
$(BUILD)/nocfi_%/libnocfi.so: tests/fixtures/nocfi/libnocfi.c | $(BUILD)
	mkdir -p $(@D)
	gcc $(NOCFI_FLAGS) $(if $(filter fp,$*),-fno-omit-frame-pointer,-fomit-frame-pointer) -o $@.full $<
	objcopy --remove-section=.eh_frame --remove-section=.eh_frame_hdr --strip-unneeded $@.full $@
	rm -f $@.full

$(BUILD)/nocfi_%/nocfi_main: tests/fixtures/nocfi/nocfi_main.c $(BUILD)/nocfi_%/libnocfi.so
	gcc -g -O2 -fomit-frame-pointer -fno-optimize-sibling-calls -o $@ $< -L$(@D) -lnocfi -Wl,-rpath,'$$ORIGIN'

.PRECIOUS: $(BUILD)/nocfi_%/libnocfi.so
fixtures: $(BUILD)/nocfi_fp/nocfi_main $(BUILD)/nocfi_nofp/nocfi_main
