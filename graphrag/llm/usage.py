"""Per-stage LLM usage counts, so runs can report what the LLM cost."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class _StageUsage:
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0


_USAGE_FIELDS = tuple(f.name for f in fields(_StageUsage))


class UsageCounter:
    """Per-stage call/token/retry counts, shared by the clients of one ``GraphRAG``."""

    def __init__(self) -> None:
        self._stages: dict[str, _StageUsage] = {}

    def record(
        self,
        stage: str,
        *,
        calls: int = 0,
        cached: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        retries: int = 0,
        failures: int = 0,
    ) -> None:
        u = self._stages.setdefault(stage, _StageUsage())
        u.calls += calls
        u.cached += cached
        u.prompt_tokens += prompt_tokens
        u.completion_tokens += completion_tokens
        u.retries += retries
        u.failures += failures

    def snapshot(self) -> dict[str, dict[str, int]]:
        """A plain, JSON-able copy: ``{stage: {field: int}}``."""
        return {s: {f: getattr(u, f) for f in _USAGE_FIELDS} for s, u in self._stages.items()}

    def total(self) -> dict[str, int]:
        out = {f: 0 for f in _USAGE_FIELDS}
        for u in self._stages.values():
            for f in _USAGE_FIELDS:
                out[f] += getattr(u, f)
        return out

    def reset(self) -> None:
        self._stages.clear()

    def __repr__(self) -> str:
        return f"UsageCounter({self.snapshot()!r})"
