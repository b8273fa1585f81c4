"""The ``dualpath-plan`` program: :func:`dualpath_plan.cli.app.main` run as a process (the
console script's entry point; tests and other callers use ``main`` itself).

What this adds is start-up and exit time only, through the garbage collector (a cold ``size``
spent about a fifth of its wall time in it):
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

import gc
import sys


def run() -> int:
    gc.disable()
    try:
        from dualpath_plan.cli.app import load_command, main

        load_command(sys.argv[1:])
    finally:
        gc.freeze()
        gc.enable()
    code = main()
    gc.freeze()
    return code
