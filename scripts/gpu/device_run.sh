#!/usr/bin/env bash
# The one command for the GPU machine:   bash scripts/gpu/device_run.sh
#
# Runs, from the checkout's root, with cjit imported from .gpu (built by
# scripts/gpu/build.sh: CPython 3.12, LLVM 19 linked in, no LLVM needed here):
#   0. the machine: nvidia-smi, Python, numpy/jax versions, ptxas; unpacks
#      the extension; finds the driver (libcuda.so.1); a smoke test on the GPU
#                                                           -> $OUT/env.log
#   a. pytest -x tests/test_cuda.py tests/test_lax_cuda.py  -> $OUT/pytest.log
#   b. benchmarks/gpu_check.py (against NumPy, the CPU and JAX on the GPU)
#                                                           -> $OUT/gpu_check.log
#   a2. only when (a) failed and time is left: (a) again without -x, -v
#                                                           -> $OUT/pytest_all.log
#   summary of everything                                   -> $OUT/summary.log
# A failure of one step never stops the next.  The whole run is bounded by
# RUN_BUDGET_S (default 395 s): every step runs under `timeout`.
#
# Environment: OUT (default .gpu/out), PYTHON (default python3),
# RUN_BUDGET_S, CJIT_CUDA_LIBRARY (skips the search for the driver).
set -u

T_START=$(date +%s)
BUDGET=${RUN_BUDGET_S:-395}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
GPU=$ROOT/.gpu
OUT=${OUT:-$GPU/out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SO_NAME=_cjit.cpython-312-x86_64-linux-gnu.so
ENVLOG=$OUT/env.log
SUMMARY=$OUT/summary.log
: >"$ENVLOG"
: >"$SUMMARY"

elapsed() { echo $(($(date +%s) - T_START)); }
left() { echo $((BUDGET - $(elapsed))); }
say() { printf '%s\n' "$*" | tee -a "$ENVLOG"; }
note() { printf '%s\n' "$*" >>"$SUMMARY"; }   # a line for the summary
section() { say ""; say "==== $* (t=$(elapsed)s)"; }
# run_logged LOG SECONDS CMD...: CMD under timeout, its output appended to LOG
# and shown; returns CMD's status (124/137: timed out).
run_logged() {
    local log=$1 secs=$2
    shift 2
    ((secs < 5)) && secs=5
    printf '$ %.300s   [timeout %ss]\n' "$*" "$secs" >>"$log"
    timeout -k 10 "$secs" "$@" 2>&1 | tee -a "$log"
    return "${PIPESTATUS[0]}"
}

section "machine"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cores: $(nproc)  budget: ${BUDGET}s"
say "kernel: $(uname -r)  os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
say "glibc: $(ldd --version 2>&1 | head -1)"
say "python3: $(command -v "$PY") -> $("$PY" -VV 2>&1 | tr '\n' ' ')"
NVSMI=$(command -v nvidia-smi || ls /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi 2>/dev/null | head -1)
if [[ -n $NVSMI ]]; then
    run_logged "$ENVLOG" 30 "$NVSMI" -L
    run_logged "$ENVLOG" 30 "$NVSMI" --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
else
    say "nvidia-smi: not found"
fi
run_logged "$ENVLOG" 60 "$PY" -c '
import importlib
for m in ("numpy", "scipy", "pytest", "hypothesis", "pytest_timeout", "jax", "jaxlib"):
    try:
        mod = importlib.import_module(m)
        print(m + ":", getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m + ": MISSING", type(e).__name__, e)
'
PTXAS=$(ls "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" 2>/dev/null || command -v ptxas)
say "ptxas: ${PTXAS:-not found (the PTX tests will not assemble)} $([[ -n $PTXAS ]] && "$PTXAS" --version 2>&1 | tail -1)"
say "cc: $(command -v cc gcc | head -1) $(gcc --version 2>/dev/null | head -1)"
say "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"

# ---- the extension: unpacked into .gpu/cjit, or a copy in /tmp when .gpu is read-only
section "cjit from .gpu"
PKG_PARENT=$GPU
if [[ ! -f $GPU/cjit/$SO_NAME ]] && ! { [[ -w $GPU/cjit ]] && touch "$GPU/cjit/.w" 2>/dev/null && rm -f "$GPU/cjit/.w"; }; then
    PKG_PARENT=$(mktemp -d "${TMPDIR:-/tmp}/cjit-gpu.XXXXXX")
    cp -r "$GPU/cjit" "$PKG_PARENT/"
    say "$GPU/cjit is not writable: using a copy in $PKG_PARENT"
fi
SO=$PKG_PARENT/cjit/$SO_NAME
if [[ ! -f $SO ]]; then
    if command -v xz >/dev/null; then
        xz -dc "$GPU/$SO_NAME.xz" >"$SO.tmp" && mv "$SO.tmp" "$SO"
    else
        "$PY" -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as f, open(sys.argv[2], "wb") as g: shutil.copyfileobj(f, g)' \
            "$GPU/$SO_NAME.xz" "$SO.tmp" && mv "$SO.tmp" "$SO"
    fi
fi
want_sum=$(cut -d' ' -f1 "$GPU/$SO_NAME.sha256" 2>/dev/null)
have_sum=$(sha256sum "$SO" 2>/dev/null | cut -d' ' -f1)
if [[ -n $want_sum && $want_sum == "$have_sum" ]]; then
    say "extension: $SO (sha256 ok)"
else
    say "extension: $SO: sha256 MISMATCH or missing (want ${want_sum:-?}, have ${have_sum:-none})"
    note "WARNING: the extension's sha256 does not match .gpu/$SO_NAME.sha256"
fi
say "ldd:"
ldd "$SO" 2>&1 | tee -a "$ENVLOG"
if ldd "$SO" 2>&1 | grep -q "not found"; then note "WARNING: ldd: $(ldd "$SO" 2>&1 | grep 'not found' | tr '\n' ' ')"; fi
say "build: $(tr '\n' ';' <"$GPU/BUILD_INFO" 2>/dev/null)"
# the sources here against the ones .gpu was built from (tests come from here)
src_hash=$(find csrc python/cjit setup.py -type f ! -name '*.so' ! -path '*__pycache__*' -print0 2>/dev/null |
    LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
built_hash=$(sed -n 's/^source_hash: //p' "$GPU/BUILD_INFO" 2>/dev/null)
if [[ $src_hash == "$built_hash" ]]; then
    say "sources: csrc, python/cjit and setup.py are the ones .gpu was built from"
else
    say "sources: DIFFER from the ones .gpu was built from (here $src_hash, built $built_hash)"
    note "WARNING: csrc/python/setup.py here differ from the sources .gpu was built from: the tests are newer than the build"
fi
export PYTHONPATH=$PKG_PARENT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false   # JAX shares the GPU with cjit in gpu_check
export CJIT_CACHE=0                          # no disk cache (the tests turn it off too)
[[ -n $PTXAS ]] && export PATH=$(dirname "$PTXAS"):$PATH

# ---- the driver --------------------------------------------------------------
section "CUDA driver"
dl_ok() { "$PY" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$1" >/dev/null 2>&1; }
if [[ -n ${CJIT_CUDA_LIBRARY:-} ]]; then
    say "CJIT_CUDA_LIBRARY=$CJIT_CUDA_LIBRARY (given)"
elif dl_ok libcuda.so.1; then
    say "libcuda.so.1: found by the dynamic loader"
else
    found=
    for cand in /usr/local/nvidia/lib64/libcuda.so.1 /usr/local/nvidia/lib/libcuda.so.1 \
        /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/lib/wsl/lib/libcuda.so.1 \
        $(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF}') \
        $(find /usr/local/nvidia /usr/lib /usr/lib64 -maxdepth 4 -name 'libcuda.so.1' 2>/dev/null | grep -v stubs) \
        /usr/local/cuda/compat/libcuda.so.1 /usr/local/cuda/compat/lib/libcuda.so.1; do
        if [[ -e $cand ]] && dl_ok "$cand"; then found=$cand; break; fi
    done
    if [[ -n $found ]]; then
        export CJIT_CUDA_LIBRARY=$found
        export LD_LIBRARY_PATH=$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        say "libcuda.so.1: not on the loader's path; using $found (CJIT_CUDA_LIBRARY, LD_LIBRARY_PATH)"
    else
        say "libcuda.so.1: NOT FOUND anywhere; the GPU tests will skip"
        note "WARNING: no libcuda.so.1 found"
    fi
fi

section "smoke test"
run_logged "$ENVLOG" 60 "$PY" -c '
import os, sys, time
import numpy as np
import cjit, cjit.numpy as cnp
print("cjit:", cjit.__file__)
if not cjit.__file__.startswith(sys.argv[1]):
    print("SMOKE: WRONG CJIT (not the one from .gpu)")
n, why = cjit._cjit.cuda_status()
print("cuda_status:", n, why)
if n == 0:
    print("SMOKE: NO GPU"); sys.exit(0)
print("device 0:", cjit._cjit.cuda_device_info(0), "devices:", cjit.devices())
x = np.arange(12, dtype=np.float32).reshape(3, 4)
t = time.perf_counter()
r = cjit.jit(lambda a: a * 2 + 1, device="cuda")(x)
got = np.asarray(r)
print("a*2+1 on the GPU:", type(r).__name__, got.tolist(), f"{time.perf_counter() - t:.3f} s")
s = np.asarray(cjit.jit(lambda a: (a @ a.T).sum(axis=1), device="cuda")(x))
ok = np.array_equal(got, x * 2 + 1) and np.allclose(s, (x @ x.T).sum(axis=1))
print("SMOKE:", "OK" if ok else f"WRONG RESULTS {s.tolist()}")
' "$PKG_PARENT"
smoke_rc=$?
note "smoke: rc=$smoke_rc $(grep -h '^SMOKE:\|^cuda_status:\|^cjit:' "$ENVLOG" | tr '\n' ' ')"

# ---- (a) the CUDA tests ------------------------------------------------------
# pytest from a process that has imported cjit from .gpu first (and says so),
# so that no other cjit on the path can stand in for it.  The suite runs in
# 64-bit mode (tests/conftest.py sets CJIT_ENABLE_X64=1 before its import of
# cjit; this import comes first, so the variable is set here).
PYTEST=(env CJIT_ENABLE_X64=1 "$PY" -c 'import sys, cjit
where = sys.argv.pop(1)
print("pytest: cjit from", cjit.__file__, flush=True)
if not cjit.__file__.startswith(where):
    sys.exit("pytest: WRONG cjit: " + cjit.__file__ + " is not under " + where)
import pytest
sys.exit(pytest.main(sys.argv[1:]))' "$PKG_PARENT")
PYTEST_TIMEOUT=()
"$PY" -c 'import pytest_timeout' 2>/dev/null && PYTEST_TIMEOUT=(--timeout 120)
section "(a) pytest"
t0=$(elapsed)
A_SECS=$(($(left) - 200)); ((A_SECS > 150)) && A_SECS=150; ((A_SECS < 60)) && A_SECS=60
run_logged "$OUT/pytest.log" "$A_SECS" "${PYTEST[@]}" -q -x "${PYTEST_TIMEOUT[@]}" -p no:cacheprovider \
    -rfEs --durations=10 tests/test_cuda.py tests/test_lax_cuda.py
a_rc=$?
note "(a) pytest -x tests/test_cuda.py tests/test_lax_cuda.py: rc=$a_rc$( ((a_rc == 124 || a_rc == 137)) && echo " TIMED OUT after ${A_SECS}s") in $(($(elapsed) - t0))s: $(grep -E '(passed|failed|error|skipped)' "$OUT/pytest.log" | tail -1)"
grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" | head -20 | sed 's/^/    /' >>"$SUMMARY"

# ---- (b) gpu_check -------------------------------------------------------------
section "(b) gpu_check"
t0=$(elapsed)
B_SECS=$(($(left) - 10)); ((B_SECS > 330)) && B_SECS=330
run_logged "$OUT/gpu_check.log" "$B_SECS" "$PY" benchmarks/gpu_check.py
b_rc=$?
note "(b) benchmarks/gpu_check.py: rc=$b_rc$( ((b_rc == 124 || b_rc == 137)) && echo " TIMED OUT after ${B_SECS}s") in $(($(elapsed) - t0))s"
grep -E '^gpu_check:|^op matrix:|^control flow:|^timings:|^train step|^program |^chain |^softmax |^matmul |^MLP train step ' \
    "$OUT/gpu_check.log" | sed 's/^/    /' >>"$SUMMARY"
n_mis=$(grep -c 'MISMATCH' "$OUT/gpu_check.log")
note "    MISMATCH lines: $n_mis"
grep 'MISMATCH' "$OUT/gpu_check.log" | head -15 | sed 's/^/    /' >>"$SUMMARY"

# ---- (a2) when (a) failed: both files again without -x, every test's result ---
# -v prints each test's outcome as it ends, so a run cut short by the timeout
# still says how far it got.
if ((a_rc != 0 && a_rc != 5)) && (($(left) > 45)); then
    section "(a2) pytest again, without -x"
    t0=$(elapsed)
    run_logged "$OUT/pytest_all.log" $(($(left) - 8)) "${PYTEST[@]}" -v "${PYTEST_TIMEOUT[@]}" \
        -p no:cacheprovider -rfEs --tb=short tests/test_cuda.py tests/test_lax_cuda.py
    a2_rc=$?
    note "(a2) pytest tests/test_cuda.py tests/test_lax_cuda.py (no -x): rc=$a2_rc$( ((a2_rc == 124 || a2_rc == 137)) && echo " TIMED OUT") in $(($(elapsed) - t0))s: $(grep -E '(passed|failed|error|skipped)' "$OUT/pytest_all.log" | tail -1)"
    if grep -qE '^(FAILED|ERROR) ' "$OUT/pytest_all.log"; then   # pytest's own summary
        grep -E '^(FAILED|ERROR) ' "$OUT/pytest_all.log" | head -40 | sed 's/^/    /' >>"$SUMMARY"
    else                                                        # cut short: the -v lines
        grep -E ' (FAILED|ERROR) +\[' "$OUT/pytest_all.log" | head -40 | sed 's/^/    /' >>"$SUMMARY"
    fi
else
    note "(a2) not run (a: rc=$a_rc; $(left)s left)"
fi

note "total: $(elapsed)s of ${BUDGET}s"
{ echo; echo "==== summary"; cat "$SUMMARY"; } | tee -a "$ENVLOG" >/dev/null
cat "$SUMMARY"
exit 0
