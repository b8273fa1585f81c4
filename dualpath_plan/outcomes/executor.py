"""Where independent tasks (simulations, a sweep's chunks) run: in this process, on a local
process pool (the default: ``--workers N``, the machine's cores), or on a Ray cluster (``--ray
ADDRESS``, the optional ``ray`` extra) (docs/model.md section 10b).

Every task is a pure function of its input (a simulation's seed is part of its ``SimConfig``),
so what runs where changes nothing of the results: a batch's results come back in the order of
its inputs whatever order the workers finish in. Work is given as *searches*: generators that
yield a batch of inputs and are sent back the batch's results, until they return their answer
(``run_searches``); the searches of a plan (one per P/D split) advance independently, each as
soon as its own batch is done, so the workers stay busy while one search waits for a slow
simulation; a sweep's chunks are a stream whose results come back in its order
(``run_ordered``). A task that raises is run once more; if it fails again, the run stops with
the task's inputs named (``TaskFailedError``, or the task's own ``PlanInputError`` for bad
input); one out of memory stops it at once, reported as in one process. An interrupted run
(Ctrl-C, SIGTERM) cancels what is queued and ends the workers it started.

To add an executor (docs/extending.md): implement the ``Executor`` protocol below (submit,
wait, result, close) and name it in ``make_executor``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import signal
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dualpath_plan.errors import PlanInputError, TaskFailedError

# A search: yields a batch of task inputs, is sent their results (in the batch's order),
# returns its answer.
Search = Generator[list[Any], list[Any], Any]

# Attempts per task: the first run and one retry (a worker lost to the OS, a node of a
# cluster going away); a task that fails twice is reported, never dropped.
ATTEMPTS = 2


class Executor(Protocol):
    """Runs tasks ``fn(arg)``; handles are opaque to the caller."""

    name: str
    workers: int

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Any: ...

    def wait(self, handles: Sequence[Any]) -> list[Any]:
        """Those of ``handles`` that are done (at least one; blocks until then)."""
        ...

    def result(self, handle: Any) -> Any:
        """The task's result, or its exception raised."""
        ...

    def close(self, cancel: bool) -> None:
        """Release the workers; ``cancel``: drop queued tasks and end running ones."""
        ...


@dataclass(eq=False)  # a handle: hashed by identity
class _Done:
    """A task run in this process: its result or exception, at once."""

    value: Any = None
    error: BaseException | None = None


class InProcess:
    """``--workers 1``: each task runs in this process when submitted (no pool to start, and
    a traceback under DUALPATH_PLAN_DEBUG shows the task's own frames)."""

    name = "in-process"
    workers = 1

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> _Done:
        try:
            return _Done(fn(arg))
        except Exception as exc:  # reported by the driver (retried, then named)
            return _Done(error=exc)

    def wait(self, handles: Sequence[Any]) -> list[Any]:
        return list(handles)

    def result(self, handle: _Done) -> Any:
        if handle.error is not None:
            raise handle.error
        return handle.value

    def close(self, cancel: bool) -> None:
        pass


def _worker_init() -> None:
    """A pool worker leaves Ctrl-C to the parent (the terminal sends SIGINT to the whole
    process group: the parent cancels and ends the workers; a worker raising
    KeyboardInterrupt itself would print a traceback) and ends at once on SIGTERM (the
    parent's handler in cli/program.py would make it unwind instead)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _ready(_: object) -> None:
    """A task that does nothing: ``LocalPool.start``'s."""


class LocalPool:
    """A process pool on this machine (concurrent.futures): ``workers`` processes, each task
    pickled to one of them."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = cf.ProcessPoolExecutor(max_workers=workers, initializer=_worker_init)
        self._closed = False

    def start(self) -> None:
        """Start the workers now rather than at the first task: a worker is a copy of this
        process where the platform forks, best made before it runs threads of its own (a
        file writer's, a progress bar's)."""
        self._pool.submit(_ready, None).result()

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> cf.Future[Any]:
        return self._pool.submit(fn, arg)

    def wait(self, handles: Sequence[Any]) -> list[Any]:
        done, _ = cf.wait(handles, return_when=cf.FIRST_COMPLETED)
        return [h for h in handles if h in done]

    def result(self, handle: cf.Future[Any]) -> Any:
        return handle.result()

    def close(self, cancel: bool) -> None:
        """Shut the pool down; ``cancel``: its queued tasks dropped and its workers ended. A
        second call does nothing (a sweep's stream and its caller may both close it)."""
        if self._closed:
            return
        self._closed = True
        if not cancel:
            self._pool.shutdown(wait=True)
            return
        # The processes this pool started, ended by their own ids (queued tasks dropped).
        processes = list(getattr(self._pool, "_processes", {}).values())
        results = getattr(self._pool, "_result_queue", None)  # (shutdown forgets it)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            with contextlib.suppress(Exception):
                p.terminate()
        for p in processes:
            with contextlib.suppress(Exception):
                p.join(timeout=5)
        # A worker ended while it sent a large result (a sweep's rows) leaves half a message
        # in the result pipe, and the pool's thread reading it waits for the rest, which only
        # the end of every writer's copy would end: this process's is the last one left.
        # Closed, the read fails, the thread takes the pool as broken and ends (otherwise
        # the interpreter's exit waits for it forever).
        writer = getattr(results, "_writer", None)
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()


class RayCluster:
    """Tasks on a Ray cluster: ``address`` 'local' starts one on this machine with
    ``workers`` CPUs (ended on close), 'auto' joins the one this machine belongs to, anything
    else is the cluster's address (``ray://head:10001`` or ``head:6379``). The cluster's
    workers need dualpath-plan installed (the same version: tasks are pickled)."""

    name = "ray"

    def __init__(self, address: str, workers: int) -> None:
        try:
            import ray
        except ImportError:
            raise PlanInputError(
                "needs Ray: pip install 'dualpath-plan[ray]'", field="--ray"
            ) from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address == "local":
                kwargs["num_cpus"] = workers
            else:
                kwargs["address"] = address
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise PlanInputError(
                    f"cannot reach the Ray cluster at {address!r}: {exc}", field="--ray"
                ) from None
        self.workers = max(1, int(ray.cluster_resources().get("CPU", workers)))
        self._remote: dict[Callable[[Any], Any], Any] = {}
        self._submitted: list[Any] = []

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        remote = self._remote.get(fn)
        if remote is None:
            # No automatic retries: the driver retries once and then names the task.
            remote = self._remote[fn] = self._ray.remote(num_cpus=1, max_retries=0)(fn)
        ref = remote.remote(arg)
        self._submitted.append(ref)
        return ref

    def wait(self, handles: Sequence[Any]) -> list[Any]:
        ready, _ = self._ray.wait(list(handles), num_returns=1)
        ready_ids = {r.hex() for r in ready}
        return [h for h in handles if h.hex() in ready_ids]

    def result(self, handle: Any) -> Any:
        try:
            return self._ray.get(handle)
        except self._ray.exceptions.RayTaskError as exc:
            # The task's own exception (a PlanInputError stays one: bad input, exit 2).
            cause = exc.as_instanceof_cause()
            inner = getattr(exc, "cause", None)
            raise (inner if isinstance(inner, Exception) else cause) from None

    def close(self, cancel: bool) -> None:
        if cancel:  # on a cluster this run did not start, its tasks still end
            for ref in self._submitted:
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref, force=True)
        self._submitted.clear()
        if self._started:
            with contextlib.suppress(Exception):
                self._ray.shutdown()


def default_workers() -> int:
    """The machine's cores: ``--workers``'s default."""
    return os.cpu_count() or 1


def make_executor(workers: int | None = None, ray: str | None = None) -> Executor:
    """``--workers N`` (default the machine's cores; 1: in this process) or ``--ray ADDRESS``."""
    n = default_workers() if workers is None else workers
    if isinstance(n, bool) or not 1 <= n <= 4096:
        raise PlanInputError(f"expected 1 to 4,096 workers, got {workers!r}", field="--workers")
    if ray is not None:
        if not ray.strip():
            raise PlanInputError(
                "expected 'local', 'auto' or a cluster's address, got ''", field="--ray"
            )
        return RayCluster(ray.strip(), n)
    return InProcess() if n == 1 else LocalPool(n)


@dataclass
class _Pending:
    """One task in flight: which search and batch slot it fills, and its attempts so far."""

    search: int
    slot: int
    arg: Any
    attempts: int = 1


@dataclass
class _Batch:
    results: list[Any]
    left: int


@dataclass
class Progress:
    """Tasks done and known so far (a search's later batches are known when it yields them)."""

    done: int = 0
    total: int = 0
    hook: Callable[[int, int], None] | None = field(default=None, repr=False)

    def tell(self) -> None:
        if self.hook is not None:
            self.hook(self.done, self.total)


def run_searches(
    executor: Executor,
    fn: Callable[[Any], Any],
    searches: Sequence[Search],
    describe: Callable[[Any], str],
    progress: Callable[[int, int], None] | None = None,
) -> list[Any]:
    """Drive the searches to their answers (in their order), running every task ``fn(arg)``
    on ``executor``; ``describe(arg)`` names a failed task's inputs; ``progress(done, total)``
    after every task. Closes the executor: cancelled on any exception (an interrupt
    included), so no worker outlives the run."""
    answers: list[Any] = [None] * len(searches)
    batches: dict[int, _Batch] = {}
    pending: dict[Any, _Pending] = {}
    tally = Progress(hook=progress)
    ok = False

    def advance(i: int, sent: list[Any] | None) -> None:
        """Run search i to its next non-empty batch (or its answer) and submit that batch."""
        try:
            batch = searches[i].send(sent) if sent is not None else next(searches[i])
            while not batch:  # an empty batch: its results are no results
                batch = searches[i].send([])
        except StopIteration as stop:
            answers[i] = stop.value
            return
        batches[i] = _Batch([None] * len(batch), len(batch))
        tally.total += len(batch)
        for slot, arg in enumerate(batch):
            pending[executor.submit(fn, arg)] = _Pending(i, slot, arg)

    try:
        for i in range(len(searches)):
            advance(i, None)
        tally.tell()
        while pending:
            for h in executor.wait(list(pending)):
                task = pending.pop(h)
                try:
                    value = executor.result(h)
                except MemoryError:  # as in one process: out of memory, said as such
                    raise
                except Exception as exc:
                    if task.attempts < ATTEMPTS:
                        task.attempts += 1
                        pending[executor.submit(fn, task.arg)] = task
                        continue
                    raise _failed(describe(task.arg), exc) from exc
                batch = batches[task.search]
                batch.results[task.slot] = value
                batch.left -= 1
                tally.done += 1
                tally.tell()
                if batch.left == 0:
                    del batches[task.search]
                    advance(task.search, batch.results)
        ok = True
    finally:
        executor.close(cancel=not ok)
    return answers


def run_all(
    executor: Executor,
    fn: Callable[[Any], Any],
    args: Sequence[Any],
    describe: Callable[[Any], str],
    progress: Callable[[int, int], None] | None = None,
) -> list[Any]:
    """``fn`` over ``args`` on ``executor``: the results in the order of ``args``."""

    def one() -> Search:
        return (yield list(args))

    return list(run_searches(executor, fn, [one()], describe, progress)[0])


def run_ordered(
    executor: Executor,
    fn: Callable[[Any], Any],
    args: Iterable[Any],
    describe: Callable[[Any], str],
    window: int,
) -> Generator[Any, None, None]:
    """``fn`` over ``args`` on ``executor``, each result yielded as soon as it and every one
    before it are done: in the order of ``args``, at most ``window`` tasks submitted ahead of
    the one yielded next (a stream too long to hold, as a sweep's chunks). A task that raises
    is run once more, then named by ``describe``. Closes the executor when the stream ends,
    cancelled where it ends early (an exception, an interrupt, the consumer stopping)."""
    queue: deque[tuple[Any, Any]] = deque()  # (handle, arg), in the order of args
    it = iter(args)
    ok = False
    try:

        def fill() -> None:
            while len(queue) < window:
                arg = next(it, _END)
                if arg is _END:
                    return
                queue.append((executor.submit(fn, arg), arg))

        fill()
        while queue:
            handle, arg = queue[0]
            executor.wait([handle])
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    value = executor.result(handle)
                    break
                except MemoryError:  # as in one process: out of memory, said as such
                    raise
                except Exception as exc:
                    if attempt == ATTEMPTS:
                        raise _failed(describe(arg), exc) from exc
                    handle = executor.submit(fn, arg)
                    executor.wait([handle])
            queue.popleft()
            fill()
            yield value
        ok = True
    finally:
        executor.close(cancel=not ok)


# The end of ``run_ordered``'s arguments.
_END = object()


def _failed(inputs: str, exc: Exception) -> Exception:
    """A task that failed twice, named by its inputs: bad input stays bad input (exit 2),
    anything else is a failed run (exit 1)."""
    if isinstance(exc, PlanInputError):
        return PlanInputError(f"{inputs}: {exc.detail}", field=exc.field, source=exc.source)
    return TaskFailedError(
        f"a task failed twice ({inputs}): {type(exc).__name__}: {exc}".rstrip(": ")
    )
