"""``--help`` wrapped by the terminal (issue 34): at COLUMNS 60, 80 and 120, no line wider than
the terminal, for the top-level help and every command's, and no word split or cut short
(every word of the help is a word of the same help unwrapped). Below 80 columns an option's
help goes below its name (``cli.app.STACKED_HELP_BELOW``): beside it, the help column had some
20 characters and rich cut a longer word short ("engine.CURVE.FIELD=VALU..."). A plain flag
shows no ``<bool>``."""

from __future__ import annotations

import re

import pytest
import typer

from dualpath_plan.cli.app import app, load_command, main

WIDTHS = (120, 80, 60)
# Box-drawing and padding: not words.
_FRAME = re.compile(r"[\s│╭╮╰╯─┃┏┓┗┛━]+")


def _commands() -> list[list[str]]:
    """Every command's arguments to its help: the program's, each command's, each
    subcommand's."""
    load_command(["--help"])
    root = typer.main.get_command(app)
    out: list[list[str]] = [[]]

    def walk(cmd: object, path: list[str]) -> None:
        for name, sub in getattr(cmd, "commands", {}).items():
            out.append([*path, name])
            walk(sub, [*path, name])

    walk(root, [])
    return out


COMMANDS = _commands()


def _help(args: list[str], width: int, capsys: pytest.CaptureFixture[str], mp) -> str:
    mp.setenv("COLUMNS", str(width))
    mp.delenv("TERMINAL_WIDTH", raising=False)
    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


def _words(text: str) -> set[str]:
    return {w for w in _FRAME.split(text) if w}


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "dualpath-plan")
def test_help_fits_the_terminal_and_splits_no_word(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _words(_help(args, 1000, capsys, monkeypatch))
    for width in WIDTHS:
        text = _help(args, width, capsys, monkeypatch)
        wide = [line for line in text.splitlines() if len(line) > width]
        assert not wide, (width, wide[:3])
        split = sorted(_words(text) - whole)
        assert not split, (width, split[:10])
        assert "…" not in text, width


@pytest.mark.parametrize("width", [40, 59, 60, 79, 80])
def test_no_word_split_on_either_side_of_the_stacked_layout(
    width: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The top-level help and the command with the longest option names, at the widths
    # around STACKED_HELP_BELOW and below the narrowest tested above.
    for args in ([], ["size"], ["profiles", "show"]):
        whole = _words(_help(args, 1000, capsys, monkeypatch))
        text = _help(args, width, capsys, monkeypatch)
        assert not [line for line in text.splitlines() if len(line) > width], (width, args)
        assert not sorted(_words(text) - whole), (width, args)
        assert "…" not in text, (width, args)


def test_plain_flags_show_no_type(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for args in COMMANDS:
        text = _help(args, 120, capsys, monkeypatch)
        assert "<bool>" not in text, args
    # A flag with a --no- twin still shows both names.
    text = _help(["size"], 120, capsys, monkeypatch)
    assert "--help" in text
