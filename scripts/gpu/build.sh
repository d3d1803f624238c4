#!/usr/bin/env bash
# Builds .gpu/ (ignored by .gitignore) for the GPU machine:
# cjit's extension for CPython 3.12 with LLVM 19 linked statically, and a
# copy of python/cjit next to it.  Run it here, not there:
#
#     bash scripts/gpu/build.sh          (from the checkout's root, or anywhere)
#
# The build happens in a scratch copy ($SCRATCH, default /tmp/gpubuild);
# its objects are kept, so a second run only recompiles what changed.
# Needs: llvm-19-dev (static libs in /usr/lib/llvm-19/lib), gcc, Python 3.12
# ($PY312, default pyenv's 3.12.1), the libzstd.so.1 runtime.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
GPU=$REPO/.gpu
SCRATCH=${SCRATCH:-/tmp/gpubuild}
PY312=${PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}
VENV=$SCRATCH/venv312
SRC=$SCRATCH/src
SO_NAME=_cjit.cpython-312-x86_64-linux-gnu.so
log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }

mkdir -p "$SCRATCH"

# ---- 1. the venv: CPython 3.12 with numpy 2 (headers) and setuptools -------
if ! "$VENV/bin/python" -c 'import numpy, setuptools' 2>/dev/null; then
    log "creating $VENV"
    rm -rf "$VENV"
    "$PY312" -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "numpy>=2" setuptools wheel
fi

# ---- 2. the scratch copy: what git would send (tracked + untracked, not ignored)
# cp -p keeps the mtimes, so setup.py's object cache (build/obj-default) only
# recompiles files that really changed.
log "copying the working tree of $REPO to $SRC"
rm -rf "$SRC.new"
mkdir -p "$SRC.new"
(cd "$REPO" && git ls-files -co --exclude-standard -z | xargs -0 cp -p --parents -t "$SRC.new")
if [[ -d $SRC/build ]]; then mv "$SRC/build" "$SRC.new/build"; fi
rm -rf "$SRC"
mv "$SRC.new" "$SRC"

# ---- 3. llvm-config that answers setup.py with the static libraries ---------
# setup.py asks `--link-shared --libs`; this answers with the static archives
# of the components cjit uses (ORC JIT for the host, NVPTX for PTX), the C++
# runtime and LLVM's compression libraries; --libdir answers nothing, so no
# rpath to /usr/lib/llvm-19 is recorded.  --exclude-libs,ALL keeps LLVM's
# symbols out of the dynamic symbol table (only PyInit__cjit is exported),
# so it never meets another LLVM in the process (jaxlib's, triton's).
cat >"$SCRATCH/llvm-config-static" <<'EOF'
#!/bin/bash
COMPONENTS="${CJIT_LLVM_COMPONENTS:-core analysis passes orcjit object support target targetparser x86codegen x86desc x86info nvptxcodegen nvptxdesc nvptxinfo}"
case "$*" in
  --libdir) echo ;;
  "--link-shared --libs") echo "$(llvm-config-19 --link-static --libs $COMPONENTS) -lstdc++ -lz -l:libzstd.so.1" ;;
  --ldflags) echo "$(llvm-config-19 --ldflags) -Wl,--exclude-libs,ALL -Wl,--gc-sections -Wl,-O1" ;;
  *) exec llvm-config-19 "$@" ;;
esac
EOF
chmod +x "$SCRATCH/llvm-config-static"

# ---- 4. build ----------------------------------------------------------------
# LDSHARED without pyenv's -L/-rpath to its own lib dir; --as-needed before
# the objects so that only libraries really used are NEEDED.
log "building the extension (log: $SCRATCH/build.log)"
rm -f "$SRC/python/cjit/"_cjit*.so
(cd "$SRC" && LLVM_CONFIG="$SCRATCH/llvm-config-static" LDSHARED="gcc -shared" \
    LDFLAGS="-Wl,--as-needed" "$VENV/bin/python" setup.py -q build_ext --inplace) \
    >"$SCRATCH/build.log" 2>&1 || { tail -30 "$SCRATCH/build.log"; die "build failed"; }
built=$SRC/python/cjit/$SO_NAME
[[ -f $built ]] || die "no $built"
strip --strip-unneeded -o "$SCRATCH/$SO_NAME" "$built"
so=$SCRATCH/$SO_NAME

# ---- 5. checks on the shared object -------------------------------------------
log "checking $so"
allowed='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1|libzstd\.so\.1|ld-linux-x86-64\.so\.2)$'
needed=$(readelf -d "$so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
for lib in $needed; do
    [[ $lib =~ $allowed ]] || die "unexpected NEEDED library: $lib"
done
if readelf -d "$so" | grep -qE 'RPATH|RUNPATH'; then die "the .so has an rpath"; fi
# every undefined symbol is Python's, versioned (libc, libstdc++, libgcc_s, zlib),
# zstd's or a weak one
bad=$(nm -D --undefined-only "$so" | awk '$1 == "U" && $2 !~ /@/ && $2 !~ /^_?Py/ && $2 !~ /^ZSTD_/ && $2 !~ /^(compress2|crc32|uncompress)$/ {print $2}')
[[ -z $bad ]] || die "undefined symbols nobody provides: $bad"
glibc_max=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
[[ $(printf '%s\n2.36\n' "$glibc_max" | sort -V | tail -1) == 2.36 ]] || die "needs GLIBC_$glibc_max > 2.36"
glibcxx_max=$(objdump -T "$so" | grep -o 'GLIBCXX_[0-9.]*' | sed 's/GLIBCXX_//' | sort -V | tail -1)
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | tr '\n' ' ')
[[ $exported == "PyInit__cjit " ]] || die "exports more than PyInit__cjit: $exported"

# ---- 6. .gpu: the package, the compressed .so, its hash, the build record ----
log "assembling $GPU"
rm -rf "$GPU/cjit" "$GPU/$SO_NAME.xz"
(cd "$SRC/python" && tar --exclude=__pycache__ --exclude='*.so' -cf - cjit) | (cd "$GPU" && tar xf -)
xz -9 -T0 -c "$so" >"$GPU/$SO_NAME.xz"
(cd "$SCRATCH" && sha256sum "$SO_NAME") >"$GPU/$SO_NAME.sha256"
source_hash() {   # the sources the build depends on, as device_run.sh computes it
    (cd "$1" && find csrc python/cjit setup.py -type f ! -name '*.so' ! -path '*__pycache__*' -print0 |
        LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}
{
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    echo "commit: $(cd "$REPO" && git rev-parse HEAD)"
    echo "changed (csrc, python, setup.py): $(cd "$REPO" && git status --short -- csrc python setup.py | tr '\n' ' ')"
    echo "source_hash: $(source_hash "$SRC")"
    echo "python: $("$VENV/bin/python" -VV | tr '\n' ' ')"
    echo "numpy headers: $("$VENV/bin/python" -c 'import numpy; print(numpy.__version__)')"
    echo "llvm: $(llvm-config-19 --version) static: $(llvm-config-19 --link-static --libs core analysis passes orcjit object support target targetparser x86codegen x86desc x86info nvptxcodegen nvptxdesc nvptxinfo | wc -w) archives"
    echo "gcc: $(gcc --version | head -1)"
    echo "needed: $needed" | tr '\n' ' '; echo
    echo "glibc_max: $glibc_max glibcxx_max: $glibcxx_max"
    echo "so_bytes: $(stat -c %s "$so")"
} >"$GPU/BUILD_INFO"

# ---- 7. the package imports from a copy that has only .gpu's files ------------
check=$(mktemp -d)
cp -r "$GPU/cjit" "$check/"
cp "$so" "$check/cjit/"
(cd "$check" && env -u PYTHONPATH "$VENV/bin/python" -c '
import cjit, numpy as np, cjit.numpy as cnp
assert cjit.__file__.startswith("'"$check"'"), cjit.__file__
x = np.arange(12.0).reshape(3, 4)
assert np.allclose(cjit.jit(lambda a: cnp.tanh(a) @ a.T)(x), np.tanh(x) @ x.T)
print("build.sh: import and a CPU jit work;", "cuda_status:", cjit._cjit.cuda_status())')
rm -rf "$check"
du -sh "$GPU"
cat "$GPU/BUILD_INFO"
