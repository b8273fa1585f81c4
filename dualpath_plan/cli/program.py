"""The ``dualpath-plan`` program: :func:`dualpath_plan.cli.app.main` run as a process (the
console script's entry point; tests and other callers use ``main`` itself).

What this adds: SIGTERM unwinds as Ctrl-C does (outputs' temporary files removed, exit 143),
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
"""

from __future__ import annotations

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


def run() -> int:
    if sys.stdout is None:  # started with standard output closed (>&-): nowhere to report
        if sys.stderr is not None:
            print("error: standard output: closed", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminated)
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
