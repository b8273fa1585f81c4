"""The scenario option block, declared once (from :class:`ScenarioSpec`'s fields) and shared by
every command that takes a scenario.

Typer has no reusable option groups, so :func:`scenario_options` rewrites a command's signature:
the command declares ``spec: ScenarioSpec`` and its own options; the decorator adds one typer
option per spec field (flags, help and default from the field), and calls the command with the
validated spec. A field's flags, help or default change in ``scenario/spec.py`` only.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Collection
from typing import Annotated, Any, TypeVar

import typer

from dualpath_plan.scenario.spec import OPTION_GROUPS, Group, ScenarioSpec

F = TypeVar("F", bound=Callable[..., Any])


def _cli_type(annotation: Any) -> Any:
    """The type typer parses for a spec field: tuples are repeatable options (a list)."""
    if typing.get_origin(annotation) is tuple:
        item = typing.get_args(annotation)[0]
        return list[item] | None  # type: ignore[valid-type]
    return annotation


def _is_optional(annotation: Any) -> bool:
    return isinstance(annotation, types.UnionType) and type(None) in typing.get_args(annotation)


def scenario_options(
    *, groups: Collection[Group] | None = None, exclude: Collection[str] = ()
) -> Callable[[F], F]:
    """Add the spec's options (those of ``groups``, all by default, less ``exclude``) to a
    command whose signature has a ``spec: ScenarioSpec`` parameter."""
    unknown = [g for g in groups or () if g not in OPTION_GROUPS] + [
        n for n in exclude if n not in ScenarioSpec.model_fields
    ]
    assert not unknown, f"no such option group or spec field: {unknown}"

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values()
            if p.name != "spec"
        ]
        added: list[inspect.Parameter] = []
        names: list[str] = []
        for name, field in ScenarioSpec.model_fields.items():
            extra: dict[str, Any] = field.json_schema_extra  # type: ignore[assignment]
            if name in exclude or (groups is not None and extra["group"] not in groups):
                continue
            cli_type = _cli_type(field.annotation)
            default = None if typing.get_origin(field.annotation) is tuple else field.default
            option = typer.Option(
                *extra["flags"],
                help=field.description,
                show_default=default is not None and not _is_optional(cli_type),
            )
            added.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=Annotated[cli_type, option],
                )
            )
            names.append(name)
        # Arguments stay first; the command's own options, then the scenario's.
        positional = [p for p in own if p.default is inspect.Parameter.empty]
        keyword = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in own
            if p.default is not inspect.Parameter.empty
        ]

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            ctx: typer.Context = kwargs.pop(_CONTEXT)
            values = {n: kwargs.pop(n) for n in names if n in kwargs}
            # Only what the command line gave: the spec's fields_set says which (given_flags),
            # and a defaulted option is the field's own default.
            values = {
                k: v
                for k, v in values.items()
                if (v is not None or k in _NULLABLE) and _on_command_line(ctx, k)
            }
            return func(*args, spec=ScenarioSpec.build(values), **kwargs)

        # The options every command has (--json, --profiles, --set) stay last.
        common = [p for p in keyword if p.name in _COMMON]
        own_options = [p for p in keyword if p.name not in _COMMON]
        context = inspect.Parameter(
            _CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context
        )
        params = [*positional, *own_options, *added, *common, context]
        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer reads the new signature, not the command's own
        return command  # type: ignore[return-value]

    return decorate


def given_flags(spec: ScenarioSpec, fields: Collection[str]) -> list[str]:
    """The flags of those scenario ``fields`` given on this command line (a spec built by
    :func:`scenario_options` sets only those), to refuse an option that another one given with
    it would silently override."""
    given = []
    for name in fields:
        if name in spec.model_fields_set:
            extra: dict[str, list[str]] = ScenarioSpec.model_fields[name].json_schema_extra  # type: ignore[assignment]
            given.append("/".join(extra["flags"]))
    return given


def _on_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is None or source.name != "DEFAULT"


_CONTEXT = "scenario_context"
_COMMON = ("as_json", "profiles", "set_")
_NULLABLE = {
    name for name, field in ScenarioSpec.model_fields.items() if _is_optional(field.annotation)
}
