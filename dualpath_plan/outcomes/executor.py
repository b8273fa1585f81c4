"""Where independent tasks (simulations) run: in this process, on a local process pool (the
default: ``--workers N``, the machine's cores), or on a Ray cluster (``--ray ADDRESS``, the
optional ``ray`` extra) (docs/model.md section 10b).

Every task is a pure function of its input (a simulation's seed is part of its ``SimConfig``),
so what runs where changes nothing of the results: a batch's results come back in the order of
its inputs whatever order the workers finish in. Work is given as *searches*: generators that
yield a batch of inputs and are sent back the batch's results, until they return their answer
(``run_searches``); the searches of a plan (one per P/D split) advance independently, each as
soon as its own batch is done, so the workers stay busy while one search waits for a slow
simulation. A task that raises is run once more; if it fails again, the run stops with the
task's inputs named (``TaskFailedError``, or the task's own ``PlanInputError`` for bad input).
An interrupted run (Ctrl-C, SIGTERM) cancels what is queued and ends the workers it started.

To add an executor (docs/extending.md): implement the ``Executor`` protocol below (submit,
wait, result, close) and name it in ``make_executor``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import signal
from collections.abc import Callable, Generator, Sequence
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


class LocalPool:
    """A process pool on this machine (concurrent.futures): ``workers`` processes, each task
    pickled to one of them."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = cf.ProcessPoolExecutor(max_workers=workers, initializer=_worker_init)

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> cf.Future[Any]:
        return self._pool.submit(fn, arg)

    def wait(self, handles: Sequence[Any]) -> list[Any]:
        done, _ = cf.wait(handles, return_when=cf.FIRST_COMPLETED)
        return [h for h in handles if h in done]

    def result(self, handle: cf.Future[Any]) -> Any:
        return handle.result()

    def close(self, cancel: bool) -> None:
        if not cancel:
            self._pool.shutdown(wait=True)
            return
        # The processes this pool started, ended by their own ids (queued tasks dropped).
        processes = list(getattr(self._pool, "_processes", {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            with contextlib.suppress(Exception):
                p.terminate()
        for p in processes:
            with contextlib.suppress(Exception):
                p.join(timeout=5)


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


def _failed(inputs: str, exc: Exception) -> Exception:
    """A task that failed twice, named by its inputs: bad input stays bad input (exit 2),
    anything else is a failed run (exit 1)."""
    if isinstance(exc, PlanInputError):
        return PlanInputError(f"{inputs}: {exc.detail}", field=exc.field, source=exc.source)
    return TaskFailedError(
        f"a task failed twice ({inputs}): {type(exc).__name__}: {exc}".rstrip(": ")
    )
