"""The ``dualpath-plan`` program: :func:`dualpath_plan.cli.app.main` run as a process (the
console script's entry point, :func:`run`; tests and other callers use ``main`` itself, or
:func:`command`, the program without its end).

What this adds: SIGTERM, and every other signal whose default action ends the process and that a
process may catch (:data:`TERMINATING`: SIGHUP, SIGQUIT, SIGUSR1/2, SIGALRM, SIGXCPU, SIGVTALRM,
SIGPROF, the real-time signals...), unwinds as Ctrl-C does (outputs' temporary files removed,
exit 128 + the signal's number),
and start-up and exit time, through the garbage collector (a cold ``size`` spent about a fifth
of its wall time in it):
- While the modules load, automatic collections are paused: an import allocates hundreds of
  thousands of objects (classes, functions, pydantic schemas), none of them garbage, and every
  collection of the oldest generation traverses all of them again.
- Once the invoked command's modules are loaded, their objects are frozen (``gc.freeze``: moved
  to a generation no collection visits) and collections resume, so the command's own garbage is
  collected as before.
- When the command returns, the process ends: its objects are frozen too, so the interpreter's
  final collection does not traverse them (about 40 ms for ``size``); the OS reclaims the
  memory. Nothing of the tool needs a collection at exit: its files are closed and standard
  output is flushed by the interpreter either way.
- Where the run leaves nothing to tear down (no thread but the main one, no exit handler
  registered, standard output and error flushed), the process ends there (``end``): the
  interpreter's teardown of every module's objects took about 10 ms of a cold ``size``, and
  freeing memory the OS reclaims anyway is all it did. A run that started a thread or a
  process pool, registered an exit handler (Ray, logging) or could not flush its output ends
  as before.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sys


def _terminated(signum: int, frame: object) -> None:
    # SIGTERM (kill, a CI job's timeout, a container stopping) unwinds like Ctrl-C: every
    # output's temporary file is removed on the way out and the targets stay as they were
    # (by default the process died at once and left a partial temporary file behind).
    raise SystemExit(128 + signum)


# Signals whose default action ends the process (signal(7)) and that may be caught, by name
# (those a platform lacks are skipped). Not here: SIGINT (Python's KeyboardInterrupt, exit 130),
# SIGPIPE and SIGXFSZ (Python ignores them: a write then fails with EPIPE or EFBIG and says so),
# SIGKILL and SIGSTOP (cannot be caught), and the faults the process raises itself (SIGSEGV,
# SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT), where a Python handler cannot resume.
TERMINATING = (
    "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF",
    "SIGXCPU", "SIGIO", "SIGPOLL", "SIGPWR", "SIGSTKFLT", "SIGLOST", "SIGEMT",
)  # fmt: skip


def terminating_signals() -> list[int]:
    """The numbers of :data:`TERMINATING` on this platform, and its real-time signals (their
    default action ends the process too)."""
    numbers = {int(getattr(signal, name)) for name in TERMINATING if hasattr(signal, name)}
    if hasattr(signal, "SIGRTMIN") and hasattr(signal, "SIGRTMAX"):
        numbers.update(range(int(signal.SIGRTMIN), int(signal.SIGRTMAX) + 1))
    return sorted(numbers & {int(s) for s in signal.valid_signals()})


def run() -> int:
    """The console script: the invoked command (``command``), then the process ends at once
    where nothing is left to tear down (``end``); else the command's exit code."""
    code = command()
    end(code)
    return code


def end(code: int) -> None:
    """End the process with ``code`` now, without the interpreter's teardown, where the run
    left nothing it would do: the main thread alone, no exit handler registered, standard
    output and error flushed. Otherwise return (the caller exits as usual)."""
    app = sys.modules.get("dualpath_plan.cli.app")
    threading = sys.modules.get("threading")
    handlers = getattr(atexit, "_ncallbacks", None)  # CPython's count of exit handlers
    if (app is not None and app.STDOUT_REFUSED) or handlers is None or handlers() != 0:
        return
    if threading is not None and threading.active_count() != 1:
        return
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError, AttributeError):
        return  # the interpreter's own exit says what it says of a stream it cannot flush
    os._exit(code)


def command() -> int:
    """The command of ``sys.argv`` as :func:`dualpath_plan.cli.app.main` runs it, with the
    garbage collector paused while its modules load and its objects frozen at the end."""
    if sys.stderr is None:
        # Started with standard error closed (2>&-): its lines go nowhere, as the user asked,
        # rather than every use of sys.stderr failing (an internal error, exit 1).
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115  # open to the process's end
    if sys.stdout is None:  # started with standard output closed (>&-): nowhere to report
        if sys.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                print("error: standard output: closed", file=sys.stderr)
        return 2
    # Every signal whose default ends the process unwinds as SIGTERM does (SIGHUP from a
    # closed terminal, SIGQUIT, SIGUSR1/2 left sweep's temporary files of 135 to 234 MB; so
    # did SIGALRM, SIGXCPU from a CPU-time limit, SIGVTALRM and SIGPROF). One the parent
    # ignores stays ignored (nohup's SIGHUP).
    for signum in terminating_signals():
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, _terminated)
    gc.disable()
    try:
        from dualpath_plan.cli.app import STDOUT_REFUSED, load_command, main

        load_command(sys.argv[1:])
    finally:
        gc.freeze()
        gc.enable()
    code = main()
    gc.freeze()
    if STDOUT_REFUSED:
        # Standard output refused a write: pointed at nothing, so that the interpreter's
        # flush at exit does not print "Exception ignored" after the one-line error.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    return code
