#!/usr/bin/env bash
# `make test-portability`: the test suite once per family of OpenBLAS
# kernels this processor can execute (forced with OPENBLAS_CORETYPE), and
# once more with every core kept busy by other processes.  A test that
# holds a result bit for bit through a BLAS gemm, or that races a busy
# scheduler, fails in one of these runs and not on the machine where it was
# written.  Not part of `make test`: it runs the suite five times or so.
#
# Usage: scripts/test_portability.sh [PYTEST_ARGS...]   (default: tests)
set -uo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
args=("$@")
((${#args[@]})) || args=(tests)

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
cores=()
has avx512f && has avx512bw && has avx512vl && has avx512dq && cores+=(SkylakeX)
has avx2 && has fma && cores+=(Haswell)
has avx && cores+=(Sandybridge)
has sse4_2 && cores+=(Nehalem)

declare -a names results
run() { # name, then environment assignments for the run
    local name=$1; shift
    local log=build/portability-$name.log
    mkdir -p build
    printf '== %s: %s\n' "$name" "$(env "$@" "$py" -W ignore -c 'import cjit; print(cjit._cjit.blas_library())')"
    # kernels older than AVX2 make `import cjit` warn, as it should; the
    # runs here force them on purpose
    env "$@" PYTHONWARNINGS="ignore:the BLAS library:RuntimeWarning" \
        "$py" -m pytest -q -p no:cacheprovider "${args[@]}" >"$log" 2>&1
    local rc=$?
    names+=("$name")
    results+=("$(tail -n 1 "$log") (exit $rc, log $log)")
    printf '   %s\n' "${results[-1]}"
    ((rc == 0)) || failed=1
}

failed=0
for core in "${cores[@]}"; do
    run "$core" OPENBLAS_CORETYPE="$core"
done

# every core busy: as many spinning processes as there are cores
busy=()
for ((i = 0; i < $(nproc); i++)); do
    "$py" -c 'while True: pass' &
    busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
run busy CJIT_PORTABILITY_BUSY=1
kill "${busy[@]}" 2>/dev/null
trap - EXIT

echo "== summary"
for i in "${!names[@]}"; do printf '%-12s %s\n' "${names[$i]}" "${results[$i]}"; done
exit $failed
