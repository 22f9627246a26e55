"""One writer per working dir; readers never lock."""
from __future__ import annotations

import asyncio
import contextlib
import os
from typing import AsyncIterator

from filelock import FileLock, Timeout

from graphrag.errors import WorkingDirLockedError

LOCK_NAME = ".graphrag.lock"


@contextlib.asynccontextmanager
async def writer_lock(working_dir: str, timeout: float) -> AsyncIterator[None]:
    """Hold the exclusive writer lock; a second writer waits instead of overwriting."""
    os.makedirs(working_dir, exist_ok=True)
    path = os.path.join(working_dir, LOCK_NAME)
    # Not thread-local: the lock is taken in a worker thread and released from the event loop's.
    lock = FileLock(path, thread_local=False)
    try:
        await asyncio.to_thread(lock.acquire, timeout=timeout)
    except Timeout:
        raise WorkingDirLockedError(
            f"another process is writing to {working_dir!r} (lock file {path!r}); gave up after "
            f"{timeout:g}s. Wait for it to finish or raise lock_timeout."
        ) from None
    try:
        yield
    finally:
        lock.release()


def try_lock(working_dir: str) -> "FileLock | None":
    """The writer lock if free right now, else None (for opportunistic crash recovery)."""
    lock = FileLock(os.path.join(working_dir, LOCK_NAME), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return lock
