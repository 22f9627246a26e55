"""Progress on long work: a tqdm bar on a terminal, periodic log lines elsewhere."""
from __future__ import annotations

import logging
import sys
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from tqdm import tqdm as ProgressBar

logger = logging.getLogger(__name__)

# Who else hears of progress, e.g. a server's job status: set in a task, it reaches the tasks
# and threads that task starts. Called with (description, done, total).
progress_listener: ContextVar[Optional[Callable[[str, int, int], None]]] = ContextVar(
    "graphrag_progress_listener", default=None)


class Progress:
    def __init__(self, total: int, desc: str, enabled: Optional[bool] = None) -> None:
        self.total, self.desc, self.done = total, desc, 0
        self._last_log = time.monotonic()
        self._listener = progress_listener.get()
        if self._listener is not None:
            self._listener(desc, 0, total)
        use_bar = sys.stderr.isatty() if enabled is None else enabled
        self._bar: Optional[ProgressBar] = None
        if use_bar and total:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="it", leave=False)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._listener is not None:
            self._listener(self.desc, self.done, self.total)
        if self._bar is not None:
            self._bar.update(n)
        elif time.monotonic() - self._last_log >= 5 or self.done == self.total:
            self._last_log = time.monotonic()
            logger.info("%s: %d/%d", self.desc, self.done, self.total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
