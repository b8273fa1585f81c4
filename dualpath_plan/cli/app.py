"""The ``dualpath-plan`` command. Commands only parse options, call the library and render."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from typing import IO, Annotated, Any

import numpy as np
import typer

from dualpath_plan import __version__
from dualpath_plan.cli.common import GlobalState, ProfilesOpt, SetOpt, unused_override_warnings
from dualpath_plan.errors import PlanInputError, TaskFailedError, printable
from dualpath_plan.files import deferred_commits, report_read_progress

app = typer.Typer(
    name="dualpath-plan",
    help="Plan P/D-disaggregated LLM inference clusters whose KV-cache lives in external "
    "storage: the cache-compute ratio, which link binds, how much cache should take the decode "
    "path (DualPath), the JCT and agents/s (APS) each mode reaches, and the smallest cluster "
    "for a target. Start with: dualpath-plan size",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"dualpath-plan {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    GlobalState.profiles = list(profiles or [])
    GlobalState.overrides = list(set_ or [])


# Command name -> the module that registers it, in --help order. Only the invoked command's
# module is imported (start-up time: each pulls in its outcome and report modules).
COMMANDS: dict[str, str] = {
    "size": "size_cmd",
    "recommend": "recommend_cmd",
    "sweep": "sweep_cmd",
    "simulate": "simulate_cmd",
    "engine": "engine_cmd",
    "ratio": "physics_cmd",
    "trend": "physics_cmd",
    "bounds": "paths_cmd",
    "paths": "paths_cmd",
    "validate": "validate_cmd",
    "check": "check_cmd",
    "calibrate": "calibrate_cmd",
    "profiles": "profiles_cmd",
    "aic": "aic_cmd",
    "workload": "workload_cmd",
}
_registered: set[str] = set()
# Options of the app itself that take a value (they may stand before the command's name).
_VALUED = ("--profiles", "--set")


def _invoked(args: list[str]) -> str | None:
    """The command named on the command line, if it is one of COMMANDS."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _register_commands(only: str | None = None) -> None:
    """Add command modules to the app, each once (main() may run many times in one process):
    the invoked command's, or every one (for --help and unknown names)."""
    import importlib

    modules = [COMMANDS[only]] if only else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        if name not in _registered:
            importlib.import_module(f"dualpath_plan.cli.{name}").register(app)
            _registered.add(name)


def load_command(args: list[str]) -> None:
    """Import the module of the command ``args`` name (every command's for --help and unknown
    names): main() does it first; the program (cli/program.py) before it calls main()."""
    _register_commands(_invoked(args))


def _show_rows(source: str, rows: int, done: bool) -> None:
    # One line, rewritten in place, and erased when the read is done.
    text = "\r\x1b[K" if done else f"\rreading {printable(source)}: {rows:,} rows "
    sys.stderr.write(text)
    sys.stderr.flush()


# The exit code of a run Ctrl-C stopped (128 + SIGINT), which Typer returns for it.
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input is one line on stderr and exit 2, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    GlobalState.argv = list(args)
    GlobalState.registries = []
    load_command(args)
    # Floating-point warnings would print on stderr; non-finite results are caught where they
    # are printed (cli.common.print_json), so the warnings add nothing for a user.
    np.seterr(all="ignore")
    # Long reads (a million-row trace) say where they are, on a terminal only.
    report_read_progress(_show_rows if sys.stderr.isatty() else None)
    guarded = _GuardedStdout(sys.stdout)
    sys.stdout = guarded  # type: ignore[assignment]
    try:
        # Outputs are renamed into place once the report is out (deferred_commits): a run
        # that fails on the way, standard output refusing the report included, leaves them.
        with deferred_commits() as commit_outputs:
            command = typer.main.get_command(app)  # (what app() builds: built once here)
            tidy_help(command)
            refuse_misread_options(command, args)
            # Not standalone: a usage error (a bad type, an unknown option, a missing argument)
            # comes back here and is printed as one line like every other bad input.
            code = command(args=args, prog_name="dualpath-plan", standalone_mode=False)
            if code == INTERRUPTED:
                # Typer turns Ctrl-C into Exit(130) and returns it: the run was interrupted,
                # so its outputs are not committed (a recommend --markdown was renamed into
                # place after a Ctrl-C in the middle of its simulations).
                return INTERRUPTED
            for line in unused_override_warnings():
                say(line)  # a --set the run never read (as aic's warnings: said, not fatal)
            guarded.flush()  # what print() left buffered fails here, inside the guard
            commit_outputs()
        return code if isinstance(code, int) else 0
    except typer.Abort:
        return 130
    except typer.TyperException as exc:  # click's usage errors (typer vendors click)
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined]  # no arguments: the help, as click does
            return int(getattr(exc, "exit_code", 2))
        ctx = getattr(exc, "ctx", None)
        path = ctx.command_path.partition(" ")[2] if ctx is not None else ""
        hint = f" (see dualpath-plan {path} --help)".replace("  ", " ")
        say(f"error: {printable(exc.format_message())}{hint}")
        return int(getattr(exc, "exit_code", 2))
    except SystemExit as exc:
        code = exc.code
        try:
            guarded.flush()
        except StdoutError as err:
            return _stdout_refused(err)
        return code if isinstance(code, int) else (0 if code is None else 1)
    except PlanInputError as exc:
        # One printable line whatever the message echoes (an id with a newline in it cannot
        # start a second "error:" line); a scenario field is named by its flags.
        say(f"error: {printable(_with_flags(exc))}")
        return 2
    except MemoryError as exc:
        # Under a memory limit (ulimit -v, a container's): the run's inputs asked for more
        # than the process may have. Not a bug: one line, as bad input is.
        detail = printable(exc) or "the process may not have more"
        say(
            f"error: out of memory ({detail}): a smaller --chunk, fewer agents or points, or "
            "more memory"
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except TaskFailedError as exc:
        # A simulation that failed twice, named by its inputs: not bad input, not a bug here.
        say(f"error: {printable(exc)}")
        return 1
    except StdoutError as exc:
        return _stdout_refused(exc)
    except Exception as exc:  # a bug: say so in one line unless debugging
        return _internal_error(exc)
    finally:
        # What a failed command printed before its error still goes out (as it did from the
        # stream's own buffer); a refusal now has been said already or does not matter.
        with contextlib.suppress(StdoutError):
            guarded.flush()
        sys.stdout = guarded.stream
    return 0


def _unwrapped(text: str | None) -> str | None:
    """Help text with its source line breaks joined (paragraphs, blank-line separated, kept):
    docstrings are wrapped at the source's width, and the help panels kept those breaks
    inside their own wrapping (lines broken mid-sentence at every width)."""
    if text is None:
        return None
    import inspect

    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def tidy_help(command: Any) -> None:
    """The help of ``command`` and every command under it, wrapped by the terminal alone:
    source line breaks joined (:func:`_unwrapped`), and a plain flag (an option that takes no
    value and has no --no- twin) shown without a type (typer showed ``<bool>``: a value to
    give, where there is none)."""
    command.help = _unwrapped(command.help)
    command.short_help = _unwrapped(command.short_help)
    # --help itself is made on first use (and kept): made here, to be tidied with the rest.
    help_option = command.get_help_option(typer.Context(command))
    for p in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(p, "param_type_name", "") != "option":
            continue
        p.help = _unwrapped(p.help)
        if p.is_flag and not p.secondary_opts and p.metavar is None:
            p.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)


# Below this terminal width an options table leaves its help column (what is left beside the
# option's name and type columns: 24 characters at 60 columns) narrower than the help's longest
# words (``engine.CURVE.FIELD=VALUE;``), which rich cut short with "…": each option is then
# shown on a line of its own with its help below it, across the whole panel.
STACKED_HELP_BELOW = 80


def _stacked_options_panel(
    *, name: str, params: list[Any], ctx: Any, markup_mode: Any, console: Any
) -> None:
    """typer's options panel, or below ``STACKED_HELP_BELOW`` columns the stacked layout: the
    option's names and type on one line, its help (typer's own, with its default and
    required notes) indented on the lines below."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.text import Text
    from typer import rich_utils

    if console.width >= STACKED_HELP_BELOW:
        _TYPER_OPTIONS_PANEL(
            name=name, params=params, ctx=ctx, markup_mode=markup_mode, console=console
        )
        return
    entries: list[Any] = []
    for param in params:
        if getattr(param, "param_type_name", "") == "argument":
            names = str(getattr(param, "display_name_raw", None) or param.human_readable_name)
        else:
            # As typer's columns give them: long names, short names, then the --no- twins.
            groups = [
                [o for o in opts if o.startswith("--") == long]
                for opts in (param.opts, param.secondary_opts)
                for long in (True, False)
            ]
            names = " ".join(",".join(g) for g in groups if g)
        head = Text(("* " if param.required else "") + names, style=rich_utils.STYLE_OPTION)
        shown_type = getattr(param, "display_type_rich", None)
        type_text = shown_type(ctx=ctx) if shown_type is not None else None
        if type_text:
            head.append(f" {type_text}", style=rich_utils.STYLE_TYPES)
        helps = rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode)
        entries += [head, Padding(helps, (0, 0, 0, 4))]
    if entries:
        console.print(
            Panel(
                Group(*entries),
                border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER,
                title=name,
                title_align=rich_utils.ALIGN_OPTIONS_PANEL,
            )
        )


_TYPER_OPTIONS_PANEL: Any = None


def stacked_help_on_narrow_terminals() -> None:
    """Route typer's options panels through :func:`_stacked_options_panel` (once)."""
    global _TYPER_OPTIONS_PANEL
    from typer import rich_utils

    if _TYPER_OPTIONS_PANEL is None:
        _TYPER_OPTIONS_PANEL = rich_utils._print_options_panel
        rich_utils._print_options_panel = _stacked_options_panel  # type: ignore[assignment]


def _routed_help(format_help: Any) -> Any:
    def format_stacked(self: Any, ctx: Any, formatter: Any) -> None:
        stacked_help_on_narrow_terminals()
        format_help(self, ctx, formatter)

    return format_stacked


# Help (every command's and group's, however asked for) is formatted through typer's
# format_help, which imports typer.rich_utils (and rich's markdown and syntax modules): the
# panels are routed there, when help is formatted, so that a command that prints no help does
# not import them (60 ms of a cold size).
for _kind in (typer.core.TyperCommand, typer.core.TyperGroup):
    _kind.format_help = _routed_help(_kind.format_help)  # type: ignore[method-assign]


def refuse_misread_options(command: Any, args: list[str]) -> None:
    """Two ways the parser misreads options without a word, each an error here:

    - an option that takes one value given twice: the parser kept the last and dropped the
      others (``sweep --mode basic --mode oracle`` ran oracle alone: found in a trial);
      repeatable options (--set, --grid, --phase, ...) and flags are not counted;
    - an option whose value is missing before another of the command's options: the parser
      took that option as the value (``recommend --markdown --json`` wrote a report to a file
      named '--json' and printed no JSON: found in a trial).

    ``command``: the program's click command; the arguments are walked through its groups to
    the invoked command."""
    k = 0
    while True:
        options = {
            opt: p
            for p in command.params
            if getattr(p, "param_type_name", "") == "option"
            for opt in (*p.opts, *p.secondary_opts)
        }
        seen: dict[str, list[str]] = {}
        subcommand = None
        while k < len(args):
            token = args[k]
            k += 1
            if token == "--":
                break
            if not token.startswith("-") or token == "-":
                subcommands = getattr(command, "commands", None)
                if subcommands is not None and token in subcommands:
                    subcommand = subcommands[token]
                    break
                continue  # an argument
            flag, eq, value = token.partition("=")
            if flag not in options and not token.startswith("--") and token[:2] in options:
                flag, eq, value = token[:2], "=", token[2:]  # -P3
            param = options.get(flag)
            if param is None:
                continue  # unknown: the parser says so
            if param.is_flag or param.count:
                continue
            if not eq and k == len(args):
                # (the parser said so too, but sent the reader to the program's help, not to
                # the command's)
                raise PlanInputError(
                    "expected a value, got none: the command line ends", field=flag
                )
            if not eq:
                value = args[k]
                k += 1
                if value in options or value == "--help":
                    long = next((o for o in param.opts if o.startswith("--")), flag)
                    raise PlanInputError(
                        f"expected a value, got the option {value!r} (a value that is an option's "
                        f"name goes as {long}={value})",
                        field=flag,
                    )
            if not param.multiple:
                seen.setdefault(param.name, []).append(f"{flag} {value}")
        for given in seen.values():
            if len(given) > 1:
                raise PlanInputError(
                    f"given twice ({given[0]!r} and {given[1]!r}); it takes one value (the parser "
                    "would keep the last one and drop the others silently)",
                    field=given[0].split(" ")[0],
                )
        if subcommand is None:
            return
        command = subcommand


# Set when standard output refused a write: the program (cli/program.py) then points it at
# nothing before the interpreter's exit flushes it again (main itself leaves a caller's file
# descriptors alone).
STDOUT_REFUSED: list[bool] = []


def _stdout_refused(exc: StdoutError) -> int:
    """A full disk, /dev/full: the report could not be written, said in one line. A reader that
    closed the pipe (| head) took what it wanted: no message, the exit of a process SIGPIPE
    ended (141)."""
    STDOUT_REFUSED.append(True)
    if exc.errno == errno.EPIPE:
        return 128 + 13
    say(f"error: standard output: {printable(exc.reason)}")
    return 2


class StdoutError(Exception):
    """Standard output refused a write (ENOSPC, EPIPE, EIO...): not a bug, not bad input."""

    def __init__(self, stream: IO[str], exc: OSError) -> None:
        super().__init__(exc)
        self.stream = stream
        self.errno = exc.errno
        self.reason = exc.strerror or str(exc)


class _GuardedStdout:
    """sys.stdout while a command runs: a write or flush the system refuses is a StdoutError
    (it was an OSError from anywhere, an "internal error"); everything else is the stream's.

    Where the stream has a file descriptor, the text is kept here and written with os.write
    until every byte is out: CPython's buffered writer took a short write of a large report
    as done and dropped the rest silently (``size --json`` on a nearly full disk wrote 16,384
    of 45,031 bytes and exited 0), where the next write says why (ENOSPC, EPIPE). A terminal
    gets each line as it comes; elsewhere the text goes out in blocks of ``BLOCK`` characters
    and at the end."""

    BLOCK = 1 << 16

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.parts: list[str] = []
        self.size = 0
        try:
            self.fd: int | None = stream.fileno()
            self.tty = stream.isatty()
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            self.fd, self.tty = None, False  # a stream in memory (a test's, a caller's)

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            # As a text stream does: click probes ``write(b"")`` to tell a binary stream from a
            # text one, and a bytes part taken here failed the next flush (every --help to a
            # file or a pipe was an internal error).
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self.fd is None:
            try:
                return self.stream.write(text)
            except OSError as exc:
                raise StdoutError(self.stream, exc) from None
        self.parts.append(text)
        self.size += len(text)
        if self.size >= self.BLOCK or (self.tty and "\n" in text):
            self.flush()
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()  # what was written to the stream before the guard, first
            if self.fd is None or not self.parts:
                return
            text, self.parts, self.size = "".join(self.parts), [], 0
            encoding = getattr(self.stream, "encoding", None) or "utf-8"
            data = memoryview(
                text.encode(encoding, getattr(self.stream, "errors", None) or "strict")
            )
            while data:
                try:
                    n = os.write(self.fd, data)
                except InterruptedError:
                    continue
                if n <= 0:  # nothing taken and no reason given: said as a full device
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                data = data[n:]
        except OSError as exc:
            raise StdoutError(self.stream, exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _internal_error(exc: Exception) -> int:
    if os.environ.get("DUALPATH_PLAN_DEBUG"):
        raise exc
    say(
        f"internal error (a bug; rerun with DUALPATH_PLAN_DEBUG=1 for a traceback): "
        f"{type(exc).__name__}: {printable(exc)}"
    )
    return 1


def say(line: str) -> None:
    """One line on standard error, where there is one: with stderr closed (2>&-) print() wrote
    to standard output instead, and where that refused it too, the run ended in an internal
    error (exit 1). Standard error refusing the line changes nothing of the exit code."""
    stream = sys.stderr
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):
        stream.write(line + "\n")
        stream.flush()


__all__ = ["app", "load_command", "main"]


def _with_flags(exc: PlanInputError) -> PlanInputError:
    """The error naming a scenario input by its command-line flags (``-P/--prefill-nodes``)
    rather than the spec's field name, when it names no file."""
    if exc.source is not None or not exc.field:
        return exc
    from dualpath_plan.scenario.spec import ScenarioSpec

    info = ScenarioSpec.model_fields.get(exc.field)
    extra = info.json_schema_extra if info is not None else None
    flags = extra.get("flags") if isinstance(extra, dict) else None
    if not isinstance(flags, list) or not flags:
        return exc
    return PlanInputError(exc.detail, field="/".join(str(f) for f in flags), line=exc.line)
