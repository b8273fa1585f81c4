"""Build hook: compiles the row writer (dualpath_plan/reports/_rowtext.c), a CPython extension
that writes ``sweep --out`` rows several times faster than the NumPy writer it stands in for.

The extension is compiled with the building interpreter's own settings (``sysconfig``: its C
compiler, flags, include directory and extension suffix), into the wheel (which then is
platform-specific) or, for an editable install, beside its source. Where it cannot be compiled
(no C compiler), one warning is printed and the package is built without it: the NumPy writer
(``text_columns``) is used, the same text more slowly.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("dualpath_plan") / "reports" / "_rowtext.c"


def compile_extension(source: Path, target: Path, work: Path) -> None:
    """``source`` compiled and linked into the extension module ``target``; raises on failure."""
    var = sysconfig.get_config_var
    cc, ldshared, include = var("CC"), var("LDSHARED"), sysconfig.get_path("include")
    if not cc or not ldshared:
        raise RuntimeError("this Python does not say which C compiler built it")
    obj = work / (target.stem + ".o")
    flags = [*shlex.split(var("CFLAGS") or ""), *shlex.split(var("CCSHARED") or ""), "-O2"]
    compile_cmd = [*shlex.split(cc), *flags, f"-I{include}", "-c", str(source), "-o", str(obj)]
    link_cmd = [*shlex.split(ldshared), str(obj), "-o", str(target)]
    for cmd in (compile_cmd, link_cmd):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            said = done.stderr.strip().splitlines()[-5:]
            raise RuntimeError("\n".join([shlex.join(cmd), *said]))


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        source = Path(self.root) / SOURCE
        name = "_rowtext" + str(sysconfig.get_config_var("EXT_SUFFIX"))
        editable = version == "editable"
        self._work = Path(tempfile.mkdtemp(prefix="rowtext-"))
        # An editable install imports the package from the source tree: the module goes there.
        target = source.with_name(name) if editable else self._work / name
        try:
            compile_extension(source, target, self._work)
        except (OSError, RuntimeError) as err:
            if editable:
                target.unlink(missing_ok=True)  # (not an older build of the source)
            self.app.display_warning(
                "dualpath-plan: the compiled row writer was not built, sweep --out will use the "
                f"slower NumPy writer ({err})"
            )
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if not editable:
            build_data["force_include"][str(target)] = SOURCE.with_name(name).as_posix()

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
