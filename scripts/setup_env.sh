#!/usr/bin/env bash
# Makes VENV ready to run cjit: system packages, the virtual environment, the
# Python packages, and cjit itself built and installed.  Shared by `make test`,
# `make demo`, `make bench` and `make sanitize`.  Every step is skipped when it
# is already done, so a second run takes a moment.
#
# Usage: scripts/setup_env.sh VENV [PIP_PACKAGE...]
#   PIP_PACKAGE...   extra packages for this target (scikit-learn, jax, ...)
# Environment:
#   CJIT_WERROR=1    build with -Werror
#   CJIT_SANITIZE=1  ASan/UBSan build, installed into VENV as a copy (not
#                    editable), so that it never replaces the in-place
#                    extension that the editable install of .venv uses
#   LLVM_CONFIG      llvm-config to use (default llvm-config-19)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'setup_env: %s\n' "$*" >&2; }
die() { printf 'setup_env: error: %s\n' "$*" >&2; exit 1; }

venv=${1:?usage: scripts/setup_env.sh VENV [PIP_PACKAGE...]}
shift

# One setup at a time in this checkout: two builds at once would write the
# same objects and the same in-place extension.
mkdir -p build
if command -v flock >/dev/null; then
    exec 9>build/.setup_env.lock
    flock 9 || die "cannot lock build/.setup_env.lock"
fi
extras=("$@")
werror=0; [[ ${CJIT_WERROR:-0} == 1 ]] && werror=1
sanitize=0; [[ ${CJIT_SANITIZE:-0} == 1 ]] && sanitize=1

# ---- 1. system packages (Debian names) ------------------------------------
need=()
if [[ -n ${LLVM_CONFIG:-} ]]; then
    command -v "$LLVM_CONFIG" >/dev/null ||
        die "LLVM_CONFIG=$LLVM_CONFIG is not a program. cjit needs LLVM 19: point LLVM_CONFIG at its llvm-config, or unset it to use llvm-config-19 from the Debian package llvm-19-dev (apt-get install llvm-19-dev)"
else
    command -v llvm-config-19 >/dev/null || need+=(llvm-19-dev)
fi
command -v gcc >/dev/null || need+=(build-essential)
if ! command -v python3 >/dev/null; then
    need+=(python3 python3-dev python3-venv)
else
    python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
        need+=(python3-dev)
    python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
fi
if ((${#need[@]})); then
    command -v apt-get >/dev/null ||
        die "missing: ${need[*]} (Debian names); install them with this system's package manager"
    sudo=()
    if [[ $(id -u) != 0 ]]; then
        command -v sudo >/dev/null || die "need root or sudo to install: ${need[*]}"
        sudo=(sudo)
    fi
    log "installing ${need[*]} with apt-get"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
fi

# ---- 2. the virtual environment --------------------------------------------
py=$venv/bin/python
if ! "$py" -c 'import sys' 2>/dev/null; then
    [[ -e $venv ]] && { log "$venv is broken; making it again"; rm -rf -- "$venv"; }
    log "creating $venv"
    python3 -m venv "$venv"
    # keeps git from seeing the venv, whatever it is called
    printf '*\n' >"$venv/.gitignore"
fi

# ---- 3. Python packages -----------------------------------------------------
# $venv/.cjit-pip lists what this script installed, one requirement a line.
pip_record=$venv/.cjit-pip
# scipy-openblas32: the OpenBLAS that runs matmuls (csrc/blas.c loads it at
# import; without it, the system's libopenblas.so.0 if any, else loop nests).
# A current release from PyPI rather than the distribution's: Debian 12's
# 0.3.21 takes processors newer than itself for a Pentium 4 and runs its
# SSE3 kernels, 4-5x slower.
# scipy: a reference the tests compare cjit.scipy's special functions and
# distributions against; scikit-learn: the digits data the ported examples
# train on (tests/test_ported_examples.py).  cjit itself imports neither.
packages=("numpy>=2" scipy-openblas32 pytest hypothesis scipy scikit-learn "setuptools>=64" wheel "${extras[@]}")
missing=()
for p in "${packages[@]}"; do
    grep -qxF -- "$p" "$pip_record" 2>/dev/null || [[ " ${missing[*]-} " == *" $p "* ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    log "pip install ${missing[*]}"
    "$py" -m pip install -q --disable-pip-version-check "${missing[@]}"
    printf '%s\n' "${missing[@]}" >>"$pip_record"
fi

# ---- 4. cjit itself ---------------------------------------------------------
# Rebuilt when a build input changed since the last install into this venv.
# The record holds a hash of the inputs and whether that build used -Werror
# (a -Werror build also serves a build without it, not the other way round).
build_record=$venv/.cjit-build
inputs=(setup.py pyproject.toml csrc)
((sanitize)) && inputs+=(python/cjit)   # a copy goes stale when .py files change
hash=$({
    printf 'sanitize=%s llvm_config=%s\n' "$sanitize" "${LLVM_CONFIG:-}"
    find "${inputs[@]}" -type f ! -name '*.so' ! -name '*.pyc' -print0 2>/dev/null |
        sort -z | xargs -0 -r sha256sum
} | sha256sum | cut -d' ' -f1)

if ((sanitize)); then
    built() { compgen -G "$venv/lib/python*/site-packages/cjit/_cjit*.so" >/dev/null; }
    install=("$py" -m pip install --no-build-isolation --no-deps --force-reinstall .)
else
    built() { compgen -G "python/cjit/_cjit*.so" >/dev/null; }
    install=("$py" -m pip install --no-build-isolation --no-deps -e .)
fi

read -r old_hash old_werror 2>/dev/null <"$build_record" || { old_hash=; old_werror=0; }
if [[ $old_hash == "$hash" ]] && ((old_werror >= werror)) && built; then
    exit 0
fi
log "building and installing cjit into $venv (werror=$werror sanitize=$sanitize)"
rm -f -- "$build_record"
CJIT_WERROR=$werror CJIT_SANITIZE=$sanitize "${install[@]}" ||
    die "building cjit failed (the compiler's messages are above)"
printf '%s %s\n' "$hash" "$werror" >"$build_record"
