"""``python -m dualpath_plan``: the ``dualpath-plan`` program (as the console script runs it)."""

import sys

from dualpath_plan.cli.program import run

if __name__ == "__main__":
    sys.exit(run())
