"""Build of cjit: one C extension, `cjit._cjit`, made from the Python
bindings (csrc/py_*.c) and the core (every other csrc/*.c, archived as
build/obj-<flavour>/libcjitcore.a), linked against LLVM 19's shared
library; the Python package lives in python/cjit.  The core is compiled
without Python's or NumPy's headers on the include path, so only the
bindings can include them.

Environment:
  LLVM_CONFIG=PROG   the llvm-config to ask for LLVM's flags (default
                     llvm-config-19, from Debian's llvm-19-dev)
  CJIT_WERROR=1      warnings are errors (CI and `make test` set it)
  CJIT_SANITIZE=1    AddressSanitizer + UBSan build, with assert() enabled
                     (`make sanitize`); its objects live apart in build/

Objects are cached in build/obj-<flavour>/ and compiled in parallel: after an
edit only the changed .c files are compiled again (every file when a header
or the flags change).  LLVM is looked up when the extension is built, not
when setup.py is read, so metadata commands work without it.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LLVM_CONFIG = "llvm-config-19"
LLVM_MAJOR = "19"


def env_flag(name):
    """True when the environment variable is set to 1 (as the Makefile and
    scripts/setup_env.sh read it too)."""
    return os.environ.get(name, "").strip() == "1"


WERROR = env_flag("CJIT_WERROR")
SANITIZE = env_flag("CJIT_SANITIZE")

# Relative paths: setuptools wants them, and pip runs setup.py from HERE.
SOURCES = sorted(
    os.path.join("csrc", os.path.basename(p))
    for p in glob.glob(os.path.join(HERE, "csrc", "*.c"))
)
# The bindings know Python; the core (a static library) does not.
BINDING_SOURCES = [s for s in SOURCES if os.path.basename(s).startswith("py_")]
CORE_SOURCES = [s for s in SOURCES if not os.path.basename(s).startswith("py_")]
# Any change to a header or to the op table recompiles every object.
DEPENDS = sorted(
    os.path.join("csrc", os.path.basename(p))
    for pattern in ("*.h", "*.def")
    for p in glob.glob(os.path.join(HERE, "csrc", pattern))
)

COMPILE_ARGS = ["-std=c11", "-O2", "-g", "-Wall", "-Wextra",
                # every switch over an enum (ops, op kinds, dtypes) lists
                # every value: a new op in ops.def is a compile error until
                # each switch has decided what it does with it
                "-Wswitch-enum",
                # a call without a declaration truncates a returned pointer
                # to int under C89 rules: always an error, not only in CI
                "-Werror=implicit-function-declaration",
                # only PyInit__cjit (marked by PyMODINIT_FUNC) is exported
                "-fvisibility=hidden"]
LINK_ARGS = []
if SANITIZE:
    SANITIZER = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    # Python's own CFLAGS carry -DNDEBUG; a sanitizer build wants assert().
    COMPILE_ARGS += SANITIZER + ["-UNDEBUG"]
    LINK_ARGS += SANITIZER
if WERROR:
    COMPILE_ARGS.append("-Werror")

FLAVOUR = "asan" if SANITIZE else "default"


class BuildError(SystemExit):
    """Stops the build with a message meant for a person, not a traceback."""

    def __init__(self, message):
        super().__init__("\n*** cjit build: " + message.rstrip() + "\n")


def llvm_missing_message(program, why):
    return (
        f"cannot use llvm-config: {program!r} {why}.\n"
        "cjit needs LLVM 19's development files (headers, llvm-config and the "
        "shared libLLVM-19).\n"
        "On Debian 12 they are in the package llvm-19-dev:\n"
        "    apt-get install llvm-19-dev      (with sudo when not root)\n"
        "Elsewhere, point LLVM_CONFIG at the llvm-config of an LLVM 19 "
        "installation, e.g. LLVM_CONFIG=/opt/llvm-19/bin/llvm-config."
    )


def run_llvm_config(program, *args):
    """Output of `program args...`, split into shell words."""
    try:
        out = subprocess.run([program, *args], check=True, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise BuildError(llvm_missing_message(program, "was not found"))
    except PermissionError:
        raise BuildError(llvm_missing_message(program, "is not executable"))
    except subprocess.CalledProcessError as e:
        raise BuildError(llvm_missing_message(
            program, f"failed on {' '.join(args)}: {e.stderr.strip()}"))
    return shlex.split(out.stdout)


def llvm_flags():
    """LLVM's include dirs, macros, library dirs, libraries, other link
    words, and its lib dir (as a list) for the rpath."""
    named = os.environ.get("LLVM_CONFIG", "").strip()
    program = named or DEFAULT_LLVM_CONFIG
    if shutil.which(program) is None:
        source = f"(from LLVM_CONFIG={named})" if named else "(the default)"
        raise BuildError(llvm_missing_message(program, f"{source} was not found"))

    version = run_llvm_config(program, "--version")
    if not version or version[0].split(".")[0] != LLVM_MAJOR:
        print(f"warning: cjit is written for LLVM {LLVM_MAJOR}; {program} "
              f"reports {' '.join(version) or 'no version'}", file=sys.stderr)

    include_dirs, macros = [], []
    for word in run_llvm_config(program, "--cflags"):
        if word.startswith("-I"):
            include_dirs.append(word[2:])
        elif word.startswith("-D"):
            name, _, value = word[2:].partition("=")
            if name != "NDEBUG":   # assert() is our choice, not LLVM's
                macros.append((name, value or None))
        # other words (-O, -f..., -W...) are LLVM's build choices, not ours

    libraries, link_args = [], []
    # --link-shared: the shared libLLVM-19, never the static archives.
    # -L words stay link arguments: GNU ld applies every -L to every -l,
    # wherever they stand on the command line.
    for word in (run_llvm_config(program, "--ldflags")
                 + run_llvm_config(program, "--link-shared", "--libs")):
        if word.startswith("-l"):
            libraries.append(word[2:])
        else:
            link_args.append(word)
    rpath = run_llvm_config(program, "--libdir")   # a list of one dir
    return include_dirs, macros, libraries, link_args, rpath


class BuildExt(build_ext):
    """build_ext that finds LLVM and numpy, compiles in parallel and reuses
    up-to-date objects."""

    def finalize_options(self):
        explicit_temp = self.build_temp is not None
        super().finalize_options()
        if not explicit_temp:
            # One object directory per flavour, so that `make sanitize` and
            # `make test` never mix objects.
            self.build_temp = os.path.join("build", "obj-" + FLAVOUR)

    def build_extensions(self):
        if not SOURCES:
            raise BuildError("no C sources: csrc/*.c matched nothing.")
        try:
            import numpy
        except ImportError:
            raise BuildError(
                "numpy (>= 2) must be importable at build time: "
                "pip install 'numpy>=2' (needed with --no-build-isolation).")
        inc, macros, libs, link_args, rpath = llvm_flags()
        self.compiler.compile = self._cached_parallel_compile(self.compiler.compile)
        core = self._build_core(inc, macros)
        for ext in self.extensions:
            # after the bindings' objects, before the libraries it calls
            ext.extra_objects = [core] + ext.extra_objects
            ext.include_dirs = ["csrc", numpy.get_include()] + inc + ext.include_dirs
            ext.define_macros = macros + ext.define_macros
            # LLVM first, then the system libraries it and we rely on.
            ext.libraries = libs + ext.libraries
            # rpath: libLLVM-19 is found without LD_LIBRARY_PATH
            ext.runtime_library_dirs = rpath + ext.runtime_library_dirs
            ext.extra_link_args = link_args + ext.extra_link_args
        # Always relink (cheap); objects are reused by the wrapper above.
        self.force = True
        super().build_extensions()

    def _build_core(self, llvm_include_dirs, llvm_macros):
        """Compiles CORE_SOURCES with only csrc and LLVM's headers on the
        include path (build_ext gave the compiler Python's; they are taken
        away meanwhile), archives them as libcjitcore.a and returns its
        path."""
        if not CORE_SOURCES:
            raise BuildError("no core C sources: csrc/*.c has only py_*.c files.")
        out = os.path.join(self.build_temp, "core")
        python_dirs = self.compiler.include_dirs
        self.compiler.set_include_dirs([])
        try:
            objects = self.compiler.compile(CORE_SOURCES, output_dir=out, macros=llvm_macros,
                                            include_dirs=["csrc"] + llvm_include_dirs,
                                            extra_postargs=COMPILE_ARGS, depends=DEPENDS)
        finally:
            self.compiler.set_include_dirs(python_dirs)
        lib = self.compiler.library_filename("cjitcore", output_dir=self.build_temp)
        if os.path.exists(lib):
            os.remove(lib)   # ar adds members: a deleted source must not stay in it
        self.compiler.create_static_lib(objects, "cjitcore", output_dir=self.build_temp)
        return lib

    def copy_file(self, infile, outfile, *args, **kwargs):
        """Copies like build_ext, but replaces outfile by a rename: writing
        into the old file would corrupt the extension in processes (another
        test run) that have it loaded."""
        if os.path.isdir(outfile):
            outfile = os.path.join(outfile, os.path.basename(infile))
        tmp = f"{outfile}.tmp{os.getpid()}"
        _, copied = super().copy_file(infile, tmp, *args, **kwargs)
        os.replace(tmp, outfile)
        return outfile, copied

    def _cached_parallel_compile(self, compile_one):
        """Wraps CCompiler.compile: compiles only stale objects, several at
        once, and returns every object name as compile() would."""

        def compile(sources, output_dir=None, macros=None, include_dirs=None,
                    debug=0, extra_preargs=None, extra_postargs=None,
                    depends=None):
            output_dir = output_dir or "."
            objects = self.compiler.object_filenames(sources, output_dir=output_dir)
            postargs = list(extra_postargs or [])
            werror = "-Werror" in postargs
            # Everything that changes the object code, -Werror excepted:
            # an object that compiled clean under -Werror is good for both.
            key = repr((self.compiler.compiler_so, macros, include_dirs,
                        extra_preargs, [a for a in postargs if a != "-Werror"]))
            record = os.path.join(output_dir, "cjit-flags.txt")
            old_key, old_werror = read_record(record)
            reuse_ok = old_key == key and (old_werror or not werror)
            if not reuse_ok and os.path.exists(record):
                os.remove(record)   # a failure below must not bless old objects
            newest_dep = max((os.path.getmtime(d) for d in depends or []),
                             default=0.0)

            stale = []
            for src, obj in zip(sources, objects):
                fresh = (reuse_ok and os.path.exists(obj)
                         and os.path.getmtime(obj) >= max(os.path.getmtime(src),
                                                          newest_dep))
                if not fresh:
                    stale.append(src)
                os.makedirs(os.path.dirname(obj) or ".", exist_ok=True)

            def one(src):
                return compile_one([src], output_dir=output_dir, macros=macros,
                                   include_dirs=include_dirs, debug=debug,
                                   extra_preargs=extra_preargs,
                                   extra_postargs=extra_postargs)

            jobs = max(1, min(len(stale), os.cpu_count() or 1))
            if stale:
                print(f"cjit: compiling {len(stale)} of {len(sources)} C files "
                      f"({jobs} at a time)", flush=True)
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                futures = [pool.submit(one, s) for s in stale]
            failed = [s for s, f in zip(stale, futures) if f.exception()]
            if failed:
                # The compiler's messages are already on stderr; a traceback
                # would only bury them.
                raise BuildError("compiling failed: " + ", ".join(failed)
                                 + " (the compiler's messages are above).")
            # After a partial recompile the set is only as strict as its
            # weakest member.
            write_record(record, key, werror if stale else old_werror)
            return objects

        return compile


def read_record(path):
    """(key, werror) stored by write_record, or (None, False)."""
    try:
        with open(path) as f:
            key, werror = f.read().split("\n")[:2]
        return key, werror == "1"
    except (OSError, ValueError):
        return None, False


def write_record(path, key, werror):
    with open(path, "w") as f:
        f.write(f"{key}\n{'1' if werror else '0'}\n")


setup(
    # every package under python/ (cjit.scipy.stats, cjit.example_libraries, ...)
    packages=find_packages("python"),
    package_dir={"": "python"},
    package_data={"cjit": ["*.pyi"]},
    ext_modules=[
        Extension(
            "cjit._cjit",
            sources=BINDING_SOURCES,
            depends=DEPENDS,
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            libraries=["m", "pthread", "dl"],
            extra_compile_args=COMPILE_ARGS,
            extra_link_args=LINK_ARGS,
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
