"""The model as judge of pairs the names and the rules cannot settle."""
from __future__ import annotations

import asyncio
import hashlib
import re
from typing import TYPE_CHECKING, Optional

from graphrag.operators.extraction import LLMCall
from graphrag.prompts import render

from .evidence import NameProfile

if TYPE_CHECKING:
    from graphrag.storage.base import BaseKVStorage


def parse_verdicts(answer: str, count: int) -> dict[int, bool]:
    """Read ``<n>: yes|no`` lines of a model's answer to the resolution prompt."""
    found: dict[int, bool] = {}
    for match in re.finditer(r"(?m)^\W*(\d+)\W+(yes|no|same|different)\b", answer, re.IGNORECASE):
        index = int(match.group(1))
        if 1 <= index <= count:
            found.setdefault(index, match.group(2).lower() in ("yes", "same"))
    return found


# The record of the model's verdicts, by a hash of the pair as shown to it: a cache like the
# LLM cache (a re-insert asks nothing again), never derived state.
VERDICTS_RECORD = "entity_resolution_verdicts"


def pair_line(index: int, pa: NameProfile, pb: NameProfile) -> str:
    """One numbered pair of the prompt: both names, their types and a description each."""
    def side(p: NameProfile) -> str:
        return f'"{p.name}" ({p.type}): {" ".join(p.sample.split())[:300]}'

    return f"{index}. {side(pa)}\n   vs {side(pb)}"


class Judge:
    """Asks ``llm`` about pairs in batches of ``batch_size``, caching each verdict in the
    ``meta`` store; a pair's verdict depends on the pair as shown only, so a delete and a
    re-insert give the same answer without a call. A write asks at most a budget of calls;
    the pairs it leaves unasked are kept pending by the caller and asked by a later write
    (or :meth:`GraphRAG.resolve_pending`), so which pairs are asked never depends on how the
    documents were batched, only when."""

    def __init__(self, llm: LLMCall, meta: BaseKVStorage, batch_size: int) -> None:
        self.llm, self.meta, self.batch_size = llm, meta, batch_size

    async def settle(self, pairs: list[tuple[str, str]], profiles: dict[str, NameProfile],
                     max_calls: Optional[int]) -> tuple[dict[tuple[str, str], bool], dict[str, int]]:
        """The verdict on each pair answered (True: one thing; a pair left unasked has none)
        and the counts: pairs asked and answered from the cache. At most ``max_calls``
        prompts (None: as many as the pairs need), the pairs asked in the order given."""
        if not pairs:
            return {}, {"pairs_asked": 0, "pairs_cached": 0}
        cache = dict(await self.meta.get_by_id(VERDICTS_RECORD) or {})
        lines = {(a, b): pair_line(0, profiles[a], profiles[b]) for a, b in pairs}
        keys = {pair: hashlib.sha256(line.encode("utf-8")).hexdigest()[:24] for pair, line in lines.items()}
        verdicts = {pair: bool(cache[key]) for pair, key in keys.items() if key in cache}
        waiting = [pair for pair in lines if pair not in verdicts]
        to_ask = waiting if max_calls is None else waiting[:max(0, max_calls) * self.batch_size]

        async def ask(batch: list[tuple[str, str]]) -> None:
            listing = "\n".join(pair_line(i + 1, profiles[a], profiles[b]) for i, (a, b) in enumerate(batch))
            answer = await self.llm(render("entity_resolution", pairs=listing), stage="resolution")
            found = parse_verdicts(answer, len(batch))
            for i, pair in enumerate(batch):
                verdicts[pair] = found.get(i + 1, False)
                cache[keys[pair]] = verdicts[pair]

        size = self.batch_size
        await asyncio.gather(*(ask(to_ask[i:i + size]) for i in range(0, len(to_ask), size)))
        if to_ask:
            await self.meta.upsert({VERDICTS_RECORD: cache})
        return verdicts, {"pairs_asked": len(to_ask), "pairs_cached": len(lines) - len(waiting)}
