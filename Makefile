# cjit: `make demo` and `make test` are all a fresh Debian 12 machine needs.
# Each target first runs scripts/setup_env.sh, which installs what is missing
# (llvm-19-dev, the venv, Python packages, cjit itself) and is quick when
# everything is already there.

PYTHON_VENV := .venv
ASAN_VENV   := .venv-asan
SETUP       := bash scripts/setup_env.sh
LINE_FILES  := $(wildcard csrc/*.c) $(wildcard csrc/*.h) $(wildcard python/cjit/*.py) \
               $(wildcard python/cjit/*/*.py) $(wildcard python/cjit/*/*/*.py)
# The most lines one of these files may have (DESIGN.md: one job per file).
LINE_LIMIT  := 900

.PHONY: all setup test test-portability fuzz demo bench sanitize lines structure cycles clean distclean array-api port-check

all: test

# The venv with cjit installed editable (python/cjit is used in place).
setup:
	$(SETUP) $(PYTHON_VENV)

# Warnings are errors here, as in CI (.ci/run).
test:
	CJIT_WERROR=1 $(SETUP) $(PYTHON_VENV)
	$(MAKE) -C tests/c check
	$(PYTHON_VENV)/bin/python -m pytest -q --durations=15 tests
	@echo "== the op tests again with every optional pass off (results must not change) =="
	CJIT_PASSES=-cse,-fuse,-group,-memplan $(PYTHON_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/test_ops.py

# The suite once per family of OpenBLAS kernels this processor can run
# (OPENBLAS_CORETYPE: SkylakeX, Haswell, Sandybridge, Nehalem) and once with
# every core kept busy: no test may depend on the BLAS kernel or on an idle
# machine.  Not in CI (it runs the suite about five times); logs in build/.
test-portability:
	$(SETUP) $(PYTHON_VENV)
	bash scripts/test_portability.sh

# Long differential fuzzing against NumPy (tests/test_fuzz.py, thousands of
# random programs, random seeds) and the growth tests at 4x their CI size.
# CJIT_FUZZ_EXAMPLES=N sets the number of programs.
fuzz:
	$(SETUP) $(PYTHON_VENV)
	CJIT_FUZZ_EXAMPLES=$${CJIT_FUZZ_EXAMPLES:-3000} CJIT_GROWTH_SCALE=4 \
	$(PYTHON_VENV)/bin/python -m pytest -q tests/test_fuzz.py tests/test_growth.py

# Trains an MLP on the digits (examples/train_mlp.py); examples/demo.py, the
# k-means example, runs on its own with the same venv.
demo:
	$(SETUP) $(PYTHON_VENV) scikit-learn
	$(PYTHON_VENV)/bin/python examples/train_mlp.py

bench:
	$(SETUP) $(PYTHON_VENV) jax matplotlib
	$(PYTHON_VENV)/bin/python benchmarks/run.py
	$(PYTHON_VENV)/bin/python benchmarks/bench_lax.py

# JAX's documentation pages and example programs run twice each, on JAX and
# on cjit through an import swap, in both modes; cell-by-cell comparison
# (scripts/port_check/README.md).  Needs JAX, so not in `make test` or CI;
# about 10 minutes.  The table goes to scripts/port_check/results/.
port-check:
	$(SETUP) $(PYTHON_VENV) jax==0.10.2 jaxlib==0.10.2
	$(PYTHON_VENV)/bin/python scripts/port_check/run.py \
	  --table scripts/port_check/results/table.md --details scripts/port_check/results/details.md \
	  --summary scripts/port_check/results/summary.json

# The tests under AddressSanitizer + UBSan, from a separate venv and build
# (build/obj-asan).  The Python interpreter is not instrumented, so libasan is
# preloaded; leaks are not reported (CPython keeps memory until exit).  The
# first error aborts: the report shows the C stack, and pytest's faulthandler
# the test.  --capture=sys leaves fd 2 alone, so the report is not swallowed.
sanitize:
	CJIT_SANITIZE=1 $(SETUP) $(ASAN_VENV)
	@libasan=$$(gcc -print-file-name=libasan.so); \
	case $$libasan in /*) ;; *) echo "sanitize: gcc has no libasan.so (Debian: apt-get install libasan8)" >&2; exit 1;; esac; \
	echo "LD_PRELOAD=$$libasan $(ASAN_VENV)/bin/python -m pytest -q --capture=sys tests"; \
	LD_PRELOAD=$$libasan \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1 \
	PYTHONMALLOC=malloc \
	$(ASAN_VENV)/bin/python -m pytest -q --capture=sys tests

# The array API standard's test suite, run unchanged against cjit.numpy:
#   make array-api ARRAY_API_TESTS=DIR
# DIR is a checkout of data-apis/array-api-tests with its array-api submodule;
# its requirements go into the venv.  The standard's version is 2023.12;
# ARRAY_API_MODULE=numpy runs the same tests on NumPy for comparison.
# Hypothesis draws ARRAY_API_MAX_EXAMPLES examples per test, with no deadline
# (an eager cjit call compiles a kernel per new signature).  The table of
# passes by test file is printed and the JSON report kept as
# build/array-api-<module>.json.
ARRAY_API_TESTS ?=
ARRAY_API_MODULE ?= cjit.numpy
ARRAY_API_MAX_EXAMPLES ?= 20
# Dtypes the suite is told to leave out, for both modules alike (comma
# separated, e.g. complex64,complex128); none by default.
ARRAY_API_SKIP_DTYPES ?=
array-api:
	@test -n "$(ARRAY_API_TESTS)" -a -f "$(ARRAY_API_TESTS)/requirements.txt" || \
	  { echo "usage: make array-api ARRAY_API_TESTS=DIR (a data-apis/array-api-tests checkout)" >&2; exit 2; }
	$(SETUP) $(PYTHON_VENV) $$(grep -v '^#' $(ARRAY_API_TESTS)/requirements.txt)
	mkdir -p build
	-cd $(ARRAY_API_TESTS) && ARRAY_API_TESTS_MODULE=$(ARRAY_API_MODULE) ARRAY_API_TESTS_VERSION=2023.12 \
	  ARRAY_API_TESTS_SKIP_DTYPES=$(ARRAY_API_SKIP_DTYPES) \
	  $(abspath $(PYTHON_VENV))/bin/python -m pytest -q -p no:cacheprovider array_api_tests \
	  --max-examples=$(ARRAY_API_MAX_EXAMPLES) --disable-deadline \
	  --json-report --json-report-file=$(abspath build)/array-api-$(ARRAY_API_MODULE).json
	$(PYTHON_VENV)/bin/python scripts/array_api_table.py build/array-api-$(ARRAY_API_MODULE).json

# Lines of C and Python in the core, and their total; fails naming every
# file over LINE_LIMIT lines.
lines:
	@wc -l $(or $(LINE_FILES),/dev/null)
	@over=$$(wc -l $(or $(LINE_FILES),/dev/null) | awk -v max=$(LINE_LIMIT) \
	    '$$2 != "total" && $$1 > max { printf "  %s: %d lines\n", $$2, $$1 }'); \
	if [ -n "$$over" ]; then \
	    echo "make lines: files over $(LINE_LIMIT) lines (split them by job):" >&2; \
	    echo "$$over" >&2; exit 1; \
	fi

# The C core's link graph, from the objects `make setup` built: no new link
# cycle among csrc files, no LLVM header in a target-free pass, and the
# layers printed (scripts/structure.py).
structure:
	$(SETUP) $(PYTHON_VENV)
	$(PYTHON_VENV)/bin/python scripts/structure.py build/obj-default
	python3 scripts/cycles.py

# Import cycles among the Python modules (every import, module level or in a
# function; fails on one) and the C files' cycles counting calls and type
# uses (reported only), with the Python modules by layer (scripts/cycles.py).
# Needs only python3: it reads the sources.
cycles:
	python3 scripts/cycles.py --layers --c

# Build products; the venvs stay (distclean removes them too).
clean:
	rm -rf build dist python/*.egg-info *.egg-info .pytest_cache
	rm -f python/cjit/_cjit*.so
	find . -name __pycache__ -type d -not -path './.venv*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(PYTHON_VENV) $(ASAN_VENV) .hypothesis
