"""The persistent compile cache: executables kept on disk between processes.

One SQLite database, `cache.db` in `$CJIT_CACHE_DIR`, else
`$XDG_CACHE_HOME/cjit`, else `~/.cache/cjit`; `CJIT_CACHE=0` turns it off.
It is only asked when a function's in-process cache misses: the graph was
traced, and its key (see `_key`) is looked up before compiling.  An entry
is what `Lowered.compile(for_cache=True)` serialized (csrc/pipeline.c:
the simplified graph, the plan with its memory figures, the object files,
and the same for every body of its control flow, nested ones included),
with a SHA-256 of those bytes checked before they are used.

What can go wrong never becomes the user's error: a directory that is not
the user's own with mode 0700 turns the cache off (one warning); a corrupt
entry is deleted and compiled again (one warning); a full disk, a
read-only directory or a database locked for longer than _BUSY_SECONDS
mean that this call neither reads nor writes the cache.

Bounded by CJIT_CACHE_MAX_BYTES (default 1 GiB) of entries: when a store
passes it, the least recently used entries go.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
import time
import warnings

from . import _cjit
from ._dtypes import x64_enabled

_DB_NAME = "cache.db"
_FORMAT = b"cjit-disk-cache-2"   # changes when the key's recipe or the schema does
_DEFAULT_MAX_BYTES = 1 << 30
_BUSY_SECONDS = 2.0              # wait this long for another process's write, then do without
_FALSE = ("", "0", "false", "no", "off")

_lock = threading.RLock()        # the connection and the counters
_store = {"dir": None, "conn": None}
_counts = {"hits": 0, "misses": 0, "deleted": 0}
_warned = set()
_static_key = []                 # [bytes] once computed: the parts that never change in a process


def enabled():
    return os.environ.get("CJIT_CACHE", "1").strip().lower() not in _FALSE


def cache_dir():
    d = os.environ.get("CJIT_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "cjit")


def max_bytes():
    v = os.environ.get("CJIT_CACHE_MAX_BYTES")
    if v is None:
        return _DEFAULT_MAX_BYTES
    try:
        n = int(v)
        if n < 0:
            raise ValueError
        return n
    except ValueError:
        _warn_once("max_bytes", f"cjit: CJIT_CACHE_MAX_BYTES={v!r} is not a number of bytes >= 0; "
                                f"using the default ({_DEFAULT_MAX_BYTES})")
        return _DEFAULT_MAX_BYTES


def _warn_once(kind, message):
    if kind in _warned:
        return
    _warned.add(kind)
    warnings.warn(message, RuntimeWarning, stacklevel=4)


# -- the key -------------------------------------------------------------------

def _build_id(conn):
    """A hash of the extension module's bytes: any change to cjit's C code
    (or the flags it was built with) changes it.  Hashing 1.5 MB is a few
    milliseconds of a warm first call, so the database remembers the hash
    of each file state (device, inode, size, mtime and ctime, which no
    rebuild or copy keeps)."""
    st = os.stat(_cjit.__file__)
    state = repr((_cjit.__file__, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    try:
        row = conn.execute("SELECT v FROM meta WHERE k = ?", (state,)).fetchone()
        if row is not None and len(row[0]) == 32:
            return bytes(row[0])
    except sqlite3.Error:
        pass
    h = hashlib.sha256()
    with open(_cjit.__file__, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    try:
        conn.execute("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", (state, h.digest()))
    except sqlite3.Error:
        pass
    return h.digest()


def _key(conn, lowered, donate):
    """The entry's name: a SHA-256 over everything the machine code and the
    plan depend on.  Two compiles that could differ never share a key."""
    if not _static_key:
        _static_key.append(_FORMAT + b"\0" + _build_id(conn) + _cjit._jit_target().encode())
    h = hashlib.sha256(_static_key[0])
    env = sorted((k, v) for k, v in os.environ.items()
                 if k in ("CJIT_PASSES", "CJIT_LOOP_ONE_FUNCTION") or k.startswith("CJIT_LLVM_"))
    h.update(repr(env).encode())
    h.update(b"blas=1" if _cjit._blas_in_use() else b"blas=0")
    # the mode (jax_enable_x64) the graph was traced in; the graph's dtypes
    # already differ where the mode mattered, this keeps the modes apart
    h.update(b"x64=1" if x64_enabled() else b"x64=0")
    h.update(repr(sorted(set(int(i) for i in donate))).encode())
    h.update(lowered.key_bytes())
    return h.hexdigest()


# -- the database ----------------------------------------------------------------

def _safe_dir(d):
    """Makes the directory (mode 0700) if needed; True when it is the
    user's own and nobody else may read or write it."""
    os.makedirs(d, mode=0o700, exist_ok=True)
    st = os.stat(d)
    if st.st_uid != os.geteuid():
        _warn_once("owner", f"cjit: the disk cache directory {d} belongs to another user "
                            f"(uid {st.st_uid}); running without the disk cache.  Set "
                            f"CJIT_CACHE_DIR to a directory of your own, or CJIT_CACHE=0")
        return False
    if st.st_mode & 0o077:
        _warn_once("mode", f"cjit: the disk cache directory {d} has mode "
                           f"{st.st_mode & 0o777:o}, and holds machine code that cjit runs: "
                           f"running without the disk cache until it is 700 "
                           f"(chmod 700 {d})")
        return False
    db = os.path.join(d, _DB_NAME)
    try:
        dst = os.lstat(db)
    except FileNotFoundError:
        return True
    if dst.st_uid != os.geteuid() or (dst.st_mode & 0o022) or not os.path.isfile(db) \
            or os.path.islink(db):
        _warn_once("owner", f"cjit: {db} is not a file of your own that only you can write; "
                            f"running without the disk cache")
        return False
    return True


_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    blob BLOB NOT NULL,
    sha256 TEXT NOT NULL,
    nbytes INTEGER NOT NULL,
    used INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BLOB NOT NULL);"""


def _connect(d):
    conn = sqlite3.connect(os.path.join(d, _DB_NAME), timeout=_BUSY_SECONDS,
                           isolation_level=None, check_same_thread=False)
    try:
        if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
            # a new database (the setting only takes then; on an old one it costs a write)
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        os.chmod(os.path.join(d, _DB_NAME), 0o600)      # its -wal and -shm files follow it
    except BaseException:
        conn.close()
        raise
    return conn


def _drop_database(d):
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(os.path.join(d, _DB_NAME + suffix))
        except OSError:
            pass


def _conn():
    """The open database, or None when there is no usable disk cache now.
    Called with _lock held."""
    d = cache_dir()
    if _store["dir"] == d and _store["conn"] is not None:
        return _store["conn"]
    _close()
    try:
        if not _safe_dir(d):
            return None
        try:
            conn = _connect(d)
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError):
                raise
            # not a database (a truncated or overwritten file): start afresh
            _warn_once("corrupt-db", f"cjit: the disk cache {os.path.join(d, _DB_NAME)} was "
                                     f"unreadable ({e}); it was emptied")
            _drop_database(d)
            conn = _connect(d)
    except (OSError, sqlite3.Error) as e:
        _note_unavailable(e)
        return None
    _store["dir"], _store["conn"] = d, conn
    return conn


def _close():
    conn = _store["conn"]
    _store["dir"] = _store["conn"] = None
    if conn is not None:
        try:
            conn.close()
        except sqlite3.Error:
            pass


def _note_unavailable(e):
    """A full disk, a read-only directory, a locked database: this call goes
    without the disk cache (and the connection is opened again next time).
    A database busy with other processes' writes is expected (a parallel
    test run): no warning for that."""
    if "locked" in str(e) or "busy" in str(e):
        return
    _warn_once("unavailable:" + type(e).__name__,
               f"cjit: the disk cache is unavailable ({e}); compiling without it")


def _failed(e):
    """An sqlite error during a read or write.  The database itself being
    damaged empties it; anything else only skips the cache for this call."""
    d = _store["dir"]
    _close()
    if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError) \
            and d is not None:
        _warn_once("corrupt-db", f"cjit: the disk cache in {d} was damaged ({e}); it was emptied")
        _drop_database(d)
    else:
        _note_unavailable(e)


def _lookup(lowered, donate):
    """(key, the verified bytes of its entry or None); (None, None) when
    there is no usable disk cache now.  A damaged entry is deleted (it is
    compiled again and stored anew)."""
    with _lock:
        conn = _conn()
        if conn is None:
            return None, None
        key = _key(conn, lowered, donate)
        return key, _get(conn, key)


def _get(conn, key):
    with _lock:
        try:
            row = conn.execute("SELECT blob, sha256, nbytes, used FROM entries WHERE key = ?",
                               (key,)).fetchone()
            if row is None:
                return None
            blob, digest, nbytes, used = row
            # each column of the type _put writes (another program, or a damaged
            # page, may have left a TEXT, a REAL or a NULL there), then the checksum
            if not (isinstance(blob, bytes) and isinstance(digest, str) and type(nbytes) is int
                    and type(used) is int):
                _delete_bad(conn, key, "a column has the wrong type: " + ", ".join(
                    f"{name} {type(v).__name__}" for name, v in zip(("blob", "sha256", "nbytes", "used"), row)))
                return None
            if len(blob) != nbytes or hashlib.sha256(blob).hexdigest() != digest:
                _delete_bad(conn, key, "its checksum does not match")
                return None
            _touch(key, used)
            return blob
        except sqlite3.Error as e:
            _failed(e)
            return None


# Marking an entry used is a write, which costs a first call milliseconds
# (the database's write-ahead log is made again in each process): so it
# waits for the next store or the end of the process, and is skipped for an
# entry used in the last _TOUCH_NS (an LRU order that fine is not needed).
_TOUCH_NS = 60 * 10**9
_touched = {}                    # key -> time it was used, not written yet


def _touch(key, used):
    now = time.time_ns()
    if now - used < _TOUCH_NS:
        return
    if not _touched:
        import atexit
        atexit.register(_write_touches)
    _touched[key] = now


def _write_touches(conn=None):
    """Writes the pending times of use (with _lock held, or at exit)."""
    if not _touched:
        return
    try:
        if conn is None:
            conn = _store["conn"]
            if conn is None:
                return
        conn.executemany("UPDATE entries SET used = ? WHERE key = ?",
                         [(t, k) for k, t in _touched.items()])
    except sqlite3.Error:
        pass    # a read-only or busy database: the order is a little less exact
    _touched.clear()


def _delete_bad(conn, key, why):
    """Deletes an entry that cannot be used (counted in info()'s
    disk_deleted); called with _lock held."""
    _warn_once("corrupt-entry", f"cjit: a disk cache entry was unusable ({why}); it was deleted "
                                f"and compiled again")
    try:
        conn.execute("DELETE FROM entries WHERE key = ?", (key,))
        _counts["deleted"] += 1
    except sqlite3.Error:
        pass


def _put(key, blob):
    """Stores an entry (a key already there is kept: one entry per key),
    then evicts the least recently used entries past the size limit."""
    limit = max_bytes()
    if len(blob) > limit:
        return
    with _lock:
        conn = _conn()
        if conn is None:
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                _write_touches(conn)
                conn.execute("INSERT OR IGNORE INTO entries (key, blob, sha256, nbytes, used) "
                             "VALUES (?, ?, ?, ?, ?)",
                             (key, blob, hashlib.sha256(blob).hexdigest(), len(blob),
                              time.time_ns()))
                evicted = _evict(conn, limit)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if evicted:
                conn.execute("PRAGMA incremental_vacuum")
        except sqlite3.Error as e:
            _failed(e)


def _evict(conn, limit):
    """Deletes least recently used entries until they hold at most `limit`
    bytes.  Returns how many went."""
    total = conn.execute("SELECT COALESCE(SUM(nbytes), 0) FROM entries").fetchone()[0]
    if total <= limit:
        return 0
    gone = []
    for key, nbytes in conn.execute("SELECT key, nbytes FROM entries ORDER BY used, key"):
        if total <= limit:
            break
        gone.append((key,))
        total -= nbytes
    conn.executemany("DELETE FROM entries WHERE key = ?", gone)
    return len(gone)


# -- what the rest of cjit calls -------------------------------------------------------

def compile(lowered, donate, name):
    """The Executable for C Lowered `lowered`: loaded from the disk cache
    when it holds one for this key, else compiled (and stored)."""
    if not enabled():
        return lowered.compile(donate=donate) if donate else lowered.compile()
    key, blob = _lookup(lowered, donate)
    if key is None:
        return lowered.compile(donate=donate) if donate else lowered.compile()
    if blob is not None:
        try:
            exe = lowered.load_cached(blob)
        except ValueError as e:
            with _lock:
                conn = _conn()
                if conn is not None:
                    _delete_bad(conn, key, str(e))
        else:
            with _lock:
                _counts["hits"] += 1
            if os.environ.get("CJIT_LOG_COMPILES", "0") not in _FALSE:
                print(f"cjit: {name}: served from the disk cache ({cache_dir()}), not compiled",
                      file=sys.stderr, flush=True)
            return exe
    with _lock:
        _counts["misses"] += 1
    exe, blob = lowered.compile(donate=donate, for_cache=True)
    if blob is not None:        # None: not storable (control flow nested past the entry's limit)
        _put(key, blob)
    return exe


def info():
    """disk_entries, disk_bytes (of the entries), disk_hits and disk_misses
    (this process's lookups), disk_deleted (the unusable entries this
    process deleted)."""
    entries = nbytes = 0
    with _lock:
        hits, misses, deleted = _counts["hits"], _counts["misses"], _counts["deleted"]
        conn = _conn() if enabled() else None
        if conn is not None:
            try:
                entries, nbytes = conn.execute(
                    "SELECT COUNT(*), COALESCE(SUM(nbytes), 0) FROM entries").fetchone()
            except sqlite3.Error as e:
                _failed(e)
    return {"disk_entries": int(entries), "disk_bytes": int(nbytes), "disk_hits": hits,
            "disk_misses": misses, "disk_deleted": deleted}


def clear():
    """Deletes every entry of the disk cache (the one CJIT_CACHE_DIR names
    now), even when CJIT_CACHE=0."""
    with _lock:
        conn = _conn()
        if conn is None:
            return
        try:
            conn.execute("DELETE FROM entries")
            conn.execute("PRAGMA incremental_vacuum")
        except sqlite3.Error as e:
            _failed(e)
