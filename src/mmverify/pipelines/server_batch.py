"""The reward server's micro-batcher: the items of requests arriving close together are scored
as one batch on a single daemon worker thread, each request getting back its own rows."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .reward_batch import Item


@dataclass
class _Job:
    items: list[Item]
    future: asyncio.Future


class _DaemonExecutor(concurrent.futures.Executor):
    """One daemon worker thread.  Unlike ThreadPoolExecutor's workers, which the interpreter joins
    at exit, it never holds up the process after shutdown: an item still being scored is
    abandoned (the server keeps no state that scoring writes)."""

    def __init__(self, name: str) -> None:
        self._queue: "queue.SimpleQueue[tuple[concurrent.futures.Future, Callable[[], Any]] | None]" = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            future, call = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:  # handed to the waiting request
                    future.set_exception(exc)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, functools.partial(fn, *args, **kwargs)))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._queue.put(None)
        if wait:
            self._thread.join()


class MicroBatcher:
    """Collects the items of concurrent requests for up to ``wait_s`` and scores them as one batch
    on a single worker thread (one thread: scoring is CPU-bound and models are not re-entrant)."""

    def __init__(self, score: Callable[[list[Item], list[int]], list[dict[str, Any]]], wait_s: float, max_items: int) -> None:
        self._score = score
        self.wait_s = wait_s
        self.max_items = max_items
        self._pending: list[_Job] = []
        self._wake: asyncio.Event | None = None
        self._executor: _DaemonExecutor | None = None
        self._task: asyncio.Task | None = None
        self.batches = 0  # for tests and logs: how many batches were scored

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._executor = _DaemonExecutor("mmverify-score")
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        for job in self._pending:
            if not job.future.done():
                job.future.cancel()
        self._pending.clear()

    @property
    def queued_items(self) -> int:
        return sum(len(job.items) for job in self._pending)

    def submit(self, items: list[Item]) -> asyncio.Future:
        assert self._wake is not None, "the batcher is not running"
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Job(items, future))
        self._wake.set()
        return future

    def _take(self) -> list[_Job]:
        jobs, count = [], 0
        while self._pending and (not jobs or count + len(self._pending[0].items) <= self.max_items):
            job = self._pending.pop(0)
            if job.future.done():  # its request timed out or went away while it waited
                continue
            jobs.append(job)
            count += len(job.items)
        return jobs

    async def _run(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            if self.wait_s and sum(len(j.items) for j in self._pending) < self.max_items:
                await asyncio.sleep(self.wait_s)
            self._wake.clear()
            jobs = self._take()
            if self._pending:
                self._wake.set()
            if not jobs:
                continue
            await self._score_jobs(loop, jobs)

    async def _score_jobs(self, loop: asyncio.AbstractEventLoop, jobs: list[_Job]) -> None:
        items = [item for job in jobs for item in job.items]
        lines = [line for job in jobs for line in range(1, len(job.items) + 1)]
        try:
            rows = await loop.run_in_executor(self._executor, self._score, items, lines)
        except asyncio.CancelledError:  # stopping: nobody will deliver these rows
            for job in jobs:
                job.future.cancel()
            raise
        except Exception as exc:
            if len(jobs) == 1:  # a failure of the pipeline fails this request, not the server
                if not jobs[0].future.done():
                    jobs[0].future.set_exception(exc)
                return
            for job in jobs:  # merged requests: each gets the outcome it would get alone
                await self._score_jobs(loop, [job])
            return
        self.batches += 1
        start = 0
        for job in jobs:
            if not job.future.done():
                job.future.set_result(rows[start : start + len(job.items)])
            start += len(job.items)
