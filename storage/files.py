"""Crash-safe file writes shared by every store.

A single file is replaced atomically (temporary file in the same folder, fsync,
``os.replace``). Several files written inside one :func:`commit_transaction` become
visible together: their temporary files are written first, then a manifest listing
the renames is itself written atomically (the point of no return), then the renames
happen and the manifest is removed. A process killed before the manifest exists
leaves the old files; one killed after it is rolled forward by
:func:`recover_pending_commit`, which writers call before they read anything.

Database stores join the same commit through :func:`write_ahead`: the manifest is then
written before any database commits, and names the commit and what each database needs to
finish it (see ``graphrag.stores.Stores.transaction`` and ``docs/CRASH_SAFETY.md``).
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from graphrag.errors import StorageError

logger = logging.getLogger(__name__)

MANIFEST_NAME = ".commit-manifest.json"
TMP_MARKER = ".tmp-"


class StorageFileError(StorageError, RuntimeError):
    """A store file exists but cannot be used; it is never silently replaced."""


@dataclass
class _Transaction:
    directory: str
    renames: list[tuple[str, str]] = field(default_factory=list)
    # (temp file holding the bytes, file they extend, its size before them): see atomic_append.
    appends: list[tuple[str, str, int]] = field(default_factory=list)
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    # Set by write_ahead: the manifest written (and what it listed), the redo files to remove.
    manifest: Optional[dict[str, Any]] = None
    redo_files: list[str] = field(default_factory=list)


_current: contextvars.ContextVar[Optional[_Transaction]] = contextvars.ContextVar(
    "graphrag_commit_transaction", default=None
)


def _fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temp_name(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.join(directory, f"{os.path.basename(path)}{TMP_MARKER}{os.getpid()}-{time.monotonic_ns()}")


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(path: str, data: bytes) -> str:
    tmp = _temp_name(path)
    with open(tmp, "wb") as f:
        f.write(data)
    _fsync_file(tmp)
    return tmp


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``; inside a transaction the rename waits for the commit."""
    _publish(path, _write_temp(path, data))


def atomic_write_via(path: str, write_to: Callable[[str], None]) -> None:
    """Like :func:`atomic_write_bytes` for libraries that insist on writing a path themselves."""
    tmp = _temp_name(path)
    try:
        write_to(tmp)
        _fsync_file(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    _publish(path, tmp)


def _publish(path: str, tmp: str) -> None:
    txn = _current.get()
    if txn is not None:
        txn.renames.append((tmp, os.path.abspath(path)))
        return
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


def atomic_append(path: str, data: bytes, offset: int) -> None:
    """Make ``path`` its first ``offset`` bytes followed by ``data``; inside a transaction, at
    its commit. ``data`` goes to a fsynced temporary file first and the manifest names it with
    ``offset``, so an append cut by a kill is redone whole from the same offset at recovery (a
    later append to the same file in the same transaction replaces an earlier one)."""
    tmp = _write_temp(path, data)
    txn = _current.get()
    if txn is not None:
        txn.appends.append((tmp, os.path.abspath(path), offset))
        return
    _apply_appends([(tmp, path, offset)])


def _apply_appends(appends: list[tuple[str, str, int]]) -> None:
    for tmp, final, offset in appends:
        try:
            with open(tmp, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue  # applied, and its temp file removed, before a kill
        fd = os.open(final, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, offset)
            os.pwrite(fd, data, offset)
            os.fsync(fd)
        finally:
            os.close(fd)
    for tmp, _, _ in appends:
        with contextlib.suppress(OSError):
            os.remove(tmp)


def in_transaction() -> bool:
    return _current.get() is not None


def after_commit(callback: Callable[[], None]) -> None:
    """Run ``callback`` once the current transaction's files are in place (now if none)."""
    txn = _current.get()
    if txn is None:
        callback()
    else:
        txn.after_commit.append(callback)


def _apply_renames(directory: str, renames: list[tuple[str, str]]) -> None:
    for tmp, final in renames:
        if os.path.exists(tmp):
            os.replace(tmp, final)
    _fsync_dir(directory)


@contextlib.contextmanager
def commit_transaction(directory: str) -> Iterator[None]:
    """Make every atomic write inside the block visible together, or not at all."""
    if _current.get() is not None:  # nested: the outer transaction commits
        yield
        return
    txn = _Transaction(os.path.abspath(directory))
    token = _current.set(txn)
    try:
        yield
    except BaseException:
        if txn.manifest is not None:
            raise  # past the point of no return: the next writer finishes the commit
        for tmp in [t for t, _ in txn.renames] + [t for t, _, _ in txn.appends]:
            with contextlib.suppress(OSError):
                os.remove(tmp)
        raise
    finally:
        _current.reset(token)
    if txn.renames or txn.appends or txn.manifest is not None:
        if txn.manifest is None or txn.manifest["renames"] != txn.renames or txn.manifest["appends"] != txn.appends:
            _write_manifest(txn, txn.manifest or {})
        _apply_renames(txn.directory, txn.renames)
        _apply_appends(txn.appends)
        manifest = os.path.join(txn.directory, MANIFEST_NAME)
        os.remove(manifest)
        for redo in txn.redo_files:
            with contextlib.suppress(OSError):
                os.remove(redo)
        _fsync_dir(txn.directory)
    for callback in txn.after_commit:
        callback()


def _write_manifest(txn: _Transaction, extra: dict[str, Any]) -> None:
    """Write the manifest listing every rename so far (atomically: the point of no return)."""
    txn.manifest = {**extra, "renames": list(txn.renames), "appends": list(txn.appends)}
    manifest = os.path.join(txn.directory, MANIFEST_NAME)
    os.replace(_write_temp(manifest, json.dumps(txn.manifest).encode("utf-8")), manifest)
    _fsync_dir(txn.directory)


def write_ahead(commit_id: str, databases: dict[str, Optional[bytes]]) -> None:
    """Before the databases of the current transaction commit: write the manifest now, naming
    the commit and, per database store, the record that replays its write (None: the store
    commits in a transaction stamped with ``commit_id``). From here the commit is finished,
    by this process or by the next writer's recovery, unless a stamped transaction did not
    commit (then it is rolled back: see :func:`roll_back`)."""
    txn = _current.get()
    if txn is None:
        raise RuntimeError("write_ahead outside a commit transaction")
    redo_names: dict[str, Optional[str]] = {}
    for name, record in databases.items():
        if record is None:
            redo_names[name] = None
            continue
        path = _write_temp(os.path.join(txn.directory, f".commit-redo-{name}"), record)
        txn.redo_files.append(path)
        redo_names[name] = os.path.basename(path)
    _write_manifest(txn, {"commit_id": commit_id, "databases": redo_names})


def read_manifest(directory: str) -> Optional[dict[str, Any]]:
    """The manifest of a commit in progress or interrupted (None if none), with each redo
    record's bytes in place of its file name under ``"databases"``."""
    try:
        with open(os.path.join(directory, MANIFEST_NAME), "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        return None
    databases = {}
    for name, redo in manifest.get("databases", {}).items():
        if redo is not None:
            with open(os.path.join(directory, os.path.basename(redo)), "rb") as f:
                redo = f.read()
        databases[name] = redo
    manifest["databases"] = databases
    return manifest


def roll_back(directory: str) -> None:
    """Abandon an interrupted commit whose databases did not commit: remove its manifest (the
    final files were never touched: renames start only after every database committed) and
    its temporary files."""
    os.remove(os.path.join(directory, MANIFEST_NAME))
    _fsync_dir(directory)
    recover_pending_commit(directory)
    logger.warning("Rolled back an interrupted commit in %s: its database transaction did not commit", directory)


def recover_pending_commit(directory: str) -> bool:
    """Finish a commit a killed writer left half-done, and drop orphaned temp files.

    Only a process holding the writer lock may call this. Returns True when a commit
    was rolled forward.
    """
    if not os.path.isdir(directory):
        return False
    manifest = os.path.join(directory, MANIFEST_NAME)
    rolled = False
    if os.path.exists(manifest):
        with open(manifest, "rb") as f:
            listed = json.loads(f.read())
        # The manifest may name another absolute path if the folder was moved.
        def here(path: str) -> str:
            return os.path.join(directory, os.path.basename(path))

        renames = [(here(t), here(d)) for t, d in listed["renames"]]
        appends = [(here(t), here(d), offset) for t, d, offset in listed.get("appends", [])]
        _apply_renames(directory, renames)
        _apply_appends(appends)
        os.remove(manifest)
        _fsync_dir(directory)
        logger.warning("Completed an interrupted commit in %s (%d files)", directory, len(renames) + len(appends))
        rolled = True
    for name in os.listdir(directory):
        if TMP_MARKER in name:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, name))
    return rolled


def commit_pending(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, MANIFEST_NAME))


def needs_recovery(directory: str) -> bool:
    """A commit or temporary files left by a writer (killed, or still at work)."""
    return commit_pending(directory) or any(TMP_MARKER in name for name in os.listdir(directory))


def wait_for_commit(directory: str, timeout: float = 10.0) -> None:
    """Readers take no lock; they wait for a commit in flight so they see one state."""
    deadline = time.monotonic() + timeout
    while commit_pending(directory) and time.monotonic() < deadline:
        time.sleep(0.02)


def file_signature(path: str) -> Optional[tuple[int, ...]]:
    """(mtime_ns, size, inode) of a file, or None; cheap check for "changed on disk since loaded".

    The inode matters: every atomic replace makes a new one, so a same-size rewrite within
    one tick of a coarse file-system clock is still noticed.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def parse_json_file(raw: bytes, path: str, what: str) -> Any:
    """Parse a store file's bytes, naming the file in the error when it is corrupt."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StorageFileError(
            f"{what} file {path!r} is corrupt ({exc}). It was left untouched: restore it from a "
            "backup, or delete it to rebuild that store."
        ) from exc


class SingleFileStore:
    """Mixin for a store persisted as one file.

    At index start it reloads when another process committed a newer file; after its
    own commit it remembers the file it wrote, so that is not mistaken for a change.
    """

    _file_name: str
    _loaded_signature: Optional[tuple[Any, ...]]
    _dirty: bool

    def _load(self) -> None:
        raise NotImplementedError

    def _write_files(self) -> None:
        """Write the store's files (atomically; inside a transaction, at its commit)."""
        raise NotImplementedError

    async def index_done_callback(self) -> None:
        if self._dirty:
            self._dirty = False
            self._write_files()

    async def write_ahead(self) -> None:
        """Write the files now, in a worker thread, into the commit in progress: for a store the
        rest of an insert leaves alone, so the commit has less left to do. A change made
        after (or while) it is written marks the store dirty again, and the commit writes it.
        Outside a transaction this does nothing: files must not appear before the commit."""
        if not self._dirty or not in_transaction():
            return
        self._dirty = False
        try:
            await asyncio.to_thread(self._write_files)
        except BaseException:
            self._dirty = True
            raise

    def _signature(self) -> Optional[tuple[Any, ...]]:
        """What changes on disk when another process commits this store."""
        return file_signature(self._file_name)

    def reload_if_changed(self) -> bool:
        """Read the file again if another process committed a new one since; True if so."""
        if self._signature() == self._loaded_signature:
            return False
        self._load()
        return True

    async def index_start_callback(self) -> None:
        self.reload_if_changed()

