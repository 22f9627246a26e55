"""The write's scheduling scope: overlapping work starts in order and stops together."""
from __future__ import annotations

import asyncio
import gc
import time
import warnings

import pytest

from graphrag.scheduling import BackgroundWork, StageTimer


class Boom(Exception):
    pass


def test_leaving_the_scope_awaits_every_task_and_dependencies_order_them() -> None:
    order: list[str] = []

    async def step(name: str, delay: float = 0.0) -> str:
        await asyncio.sleep(delay)
        order.append(name)
        return name

    async def main() -> list[str]:
        ready = asyncio.Event()
        async with BackgroundWork() as background:
            first = background.start(step("first", 0.02))
            gated = background.start(step("after both"), after=(ready, first))
            background.start(step("free"))
            await asyncio.sleep(0.05)
            order.append("body")
            ready.set()
        assert gated.result() == "after both"
        return order

    assert asyncio.run(main()) == ["free", "first", "body", "after both"]


def test_a_failing_task_interrupts_the_body_and_cancels_the_rest() -> None:
    reached: list[str] = []

    async def fail() -> None:
        await asyncio.sleep(0.01)
        raise Boom("embedding failed")

    async def main() -> None:
        async with BackgroundWork() as background:
            other = background.start(asyncio.sleep(10))
            background.start(fail())
            await asyncio.sleep(10)  # the body would go on paying for LLM calls
            reached.append("body went on")
        assert other.cancelled()

    started = time.perf_counter()
    with pytest.raises(Boom, match="embedding failed"):
        asyncio.run(main())
    assert time.perf_counter() - started < 5 and reached == []


def test_a_failing_body_cancels_tasks_but_lets_file_writes_finish() -> None:
    written: list[str] = []

    async def write_files() -> None:
        await asyncio.sleep(0.05)
        written.append("files")

    tasks: list[asyncio.Task] = []

    async def main() -> None:
        async with BackgroundWork() as background:
            tasks.append(background.start(asyncio.sleep(10)))
            background.start(write_files(), finish_on_error=True)
            raise Boom("extraction failed")

    started = time.perf_counter()
    with pytest.raises(Boom, match="extraction failed"):
        asyncio.run(main())
    assert written == ["files"] and tasks[0].cancelled() and time.perf_counter() - started < 5


def test_work_cancelled_before_it_starts_leaves_no_unawaited_coroutine() -> None:
    async def never() -> None:
        raise AssertionError("must not run")

    async def main() -> None:
        gate = asyncio.Event()
        async with BackgroundWork() as background:
            background.start(never(), after=(gate,))
            background.start(never())
            raise Boom()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Boom):
            asyncio.run(main())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_stage_timer_adds_up_a_stage_timed_twice() -> None:
    timer = StageTimer()

    async def main() -> None:
        async with BackgroundWork(timer) as background:
            background.start(asyncio.sleep(0.05), stage="embed")
            background.start(asyncio.sleep(0.05), stage="embed")
            with timer.stage("extract"):
                await asyncio.sleep(0.02)

    asyncio.run(main())
    assert timer.seconds["embed"] >= 0.1 and 0.02 <= timer.seconds["extract"] < 0.05
    assert set(timer.rounded()) == {"embed", "extract"}
