"""Counting answers that ignored the asked-for format, and saying so once, loudly.

A weak model that answers in prose leaves nothing to read; one WARNING per stage (the
count, one sample answer cut short, what to do) is more useful than a line per answer,
and much more than silence.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

SAMPLE_CHARS = 160
# The share of answers that may fail before an insert warns (``extraction_failure_warning_share``).
DEFAULT_WARNING_SHARE = 0.2


def short_sample(answer: str, limit: int = SAMPLE_CHARS) -> str:
    """One line of ``answer``, cut to ``limit`` characters."""
    text = " ".join((answer or "").split())
    if not text:
        return "(an empty answer)"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


@dataclass
class FormatFailures:
    """Answers of one kind (``what``: "chunks", "community reports", ...): how many there
    were, how many a repair turn fixed, how many still failed, and the first failure."""

    what: str
    total: int = 0
    repaired: int = 0
    failed: int = 0
    sample: Optional[str] = None
    warned: Optional[str] = None  # the warning ``log`` gave

    def record(self, *, failed: bool, repaired: bool = False, answer: str = "") -> None:
        self.total += 1
        self.repaired += repaired
        if failed:
            self.failed += 1
            if self.sample is None:
                self.sample = short_sample(answer)

    def warning(self, advice: str, share: float = 0.0) -> Optional[str]:
        """The warning line when more than ``share`` of the answers failed, else None."""
        if not self.failed or self.failed <= share * self.total:
            return None
        return (f"{self.failed} of {self.total} {self.what} got no answer in the expected format, "
                f"even after a repair turn; one answer was: {self.sample}. {advice}")

    def log(self, logger: logging.Logger, advice: str, share: float = 0.0) -> Optional[str]:
        """Log the warning (if any) and return it; fewer failures than ``share`` log at INFO."""
        line = self.warned = self.warning(advice, share)
        if line is not None:
            logger.warning(line)
        elif self.failed:
            logger.info("%d of %d %s got no answer in the expected format", self.failed, self.total, self.what)
        return line
