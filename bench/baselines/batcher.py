"""The Python baselines' asyncio dynamic batcher (the source article's design): requests wait up
to a window for others to join, up to a number of rows, then run as one call on one executor
thread, and each request gets its rows of the result back.

Batcher(run, executor, max_rows, window_s): `run(rows)` takes the batch's rows (every
request's, in order) and returns one result per row, indexable by position (a list, a numpy
array, or a tuple of them when `split` says how to cut it). submit(rows) awaits the request's
part. lifespan() is the FastAPI lifespan both baselines run it in.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Callable


def lifespan(batcher: "Batcher | None", executor, state: dict):
    """A FastAPI lifespan: the batcher's loop runs while the app serves (no batcher: requests
    run alone), state["ready"] says so, and the inference thread stops with the app."""
    @contextlib.asynccontextmanager
    async def run(_app):
        task = asyncio.create_task(batcher.run()) if batcher is not None else None
        state["ready"] = True
        yield
        state["ready"] = False
        if task is not None:
            task.cancel()
        executor.shutdown(wait=False, cancel_futures=True)
    return run


def split_rows(result: Any, start: int, count: int) -> Any:
    return result[start : start + count]


class Batcher:
    """Collects requests for up to window_s or max_rows rows, then runs them as one batch."""

    def __init__(self, run: Callable[[list], Any], executor, max_rows: int, window_s: float,
                 split: Callable[[Any, int, int], Any] = split_rows):
        self.run_batch, self.executor, self.split = run, executor, split
        self.max_rows, self.window_s = max_rows, window_s
        self.queue: asyncio.Queue = asyncio.Queue()

    async def submit(self, rows: list):
        fut = asyncio.get_running_loop().create_future()
        await self.queue.put((rows, fut))
        return await fut

    async def run(self):
        loop = asyncio.get_running_loop()
        while True:
            items = [await self.queue.get()]
            rows = len(items[0][0])
            deadline = loop.time() + self.window_s
            while rows < self.max_rows:
                if self.queue.empty():
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(self.queue.get(), remaining)
                    except TimeoutError:
                        break
                else:
                    item = self.queue.get_nowait()
                if rows + len(item[0]) > self.max_rows:
                    self.queue.put_nowait(item)  # goes to the back; rare (multi-row requests)
                    break
                items.append(item)
                rows += len(item[0])
            batch = [r for rs, _ in items for r in rs]
            try:
                result = await loop.run_in_executor(self.executor, self.run_batch, batch)
            except Exception as e:  # noqa: BLE001
                for _, fut in items:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            i = 0
            for rs, fut in items:
                if not fut.done():
                    fut.set_result(self.split(result, i, len(rs)))
                i += len(rs)
