"""Loading the profile library and applying ``--set KIND.FIELD=VALUE`` overrides.

Search path, later entries shadowing earlier ones by (kind, id):
1. the built-in library (``hardware_profiles/`` in a source tree, carried inside the wheel);
2. directories in ``DUALPATH_PLAN_PROFILES`` (``os.pathsep``-separated);
3. directories given with ``--profiles DIR`` (repeatable), in order.

A profile is one TOML file; its ``kind`` key says which schema it follows and its file name
(without ``.toml``) is its id. Every failure is a :class:`PlanInputError` naming the file and
the field.

Files in a folder named after a kind (``gpu/``, ``node/``, ...) are indexed by that kind and
their file name, and read and validated when first used (a command reads a few of the
library's profiles); other files are read at once, their ``kind`` key saying what they are. A
node's references (its gpu, the node its calibration is transferred from) are checked when it
is read; ``Registry.check_all`` reads every profile, as ``profiles list`` and ``validate`` do.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import (
    MAX_NUMBER_DIGITS,
    MAX_PROFILE_BYTES,
    AtomicGroup,
    check_toml_nesting,
    has_toml_comment,
    huge_integer,
    load_toml,
    non_decimal,
    refuse_inputs,
)
from dualpath_plan.frozen import record
from dualpath_plan.profiles.schemas import (
    KINDS,
    TRANSFERRED_FROM,
    EngineProfile,
    GpuProfile,
    ModelProfile,
    NodeProfile,
    ProfileBase,
    StorageProfile,
    WorkloadProfile,
    schema_for,
)

ENV_VAR = "DUALPATH_PLAN_PROFILES"
P = TypeVar("P", bound=ProfileBase)


def _a(word: str) -> str:
    """The indefinite article and ``word`` ("an engine", "a node")."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def builtin_profiles_dir() -> Path:
    """The shipped library: inside the installed package, else the source tree's top level."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_builtin_profiles"
    if packaged.is_dir():
        return packaged
    return here.parent / "hardware_profiles"


def _describe_error(err: Mapping[str, Any], kind: str) -> tuple[str, str]:
    """(field, message) for one pydantic error, phrased for a user."""
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(profile)"
    etype = err.get("type", "")
    if etype == "extra_forbidden":
        name = str(err["loc"][-1])
        known = list(schema_for(kind).model_fields)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'? (the unit is part of the name)" if close else ""
        return loc, f"unknown key for {_a(kind)} profile{hint}"
    value = err.get("input")
    if len(err.get("loc", ())) == 1 and isinstance(value, int | float):
        # A schema bound crossed by a unit slip (an efficiency of 80: percent typed) says the
        # slip, as the plausibility table does inside the bounds.
        slip = plausible.explained(f"{kind}.{loc}", value)
        if slip is not None:
            return loc, slip
    # Our own checks' messages, without pydantic's "Value error, " before them.
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if len(err.get("loc", ())) == 1 and msg == plausible.problem(f"{kind}.{loc}", value):
        return loc, msg  # the plausibility table's line states the value itself
    # A field's value is echoed; a whole-profile check (loc empty) would echo the profile.
    # A table or a long text is not echoed (an MoE curve's shapes would fill a screen).
    brief = (
        not isinstance(err.get("input"), dict | list | tuple) and len(repr(err.get("input"))) < 120
    )
    if "input" in err and etype not in ("missing",) and err.get("loc") and brief:
        value = err["input"]
        if isinstance(value, float) and math.isnan(value):
            value = "nan"
        msg = f"{msg} (got {value!r})"
    if etype in ("finite_number",):
        msg = "expected a finite number, got nan or inf"
    return loc, msg


def validate_profile(data: dict[str, Any], *, source: str) -> ProfileBase:
    """Validate one profile's data; raise PlanInputError naming the first bad field."""
    kind = data.get("kind")
    if kind not in KINDS:
        raise PlanInputError(
            f"expected 'kind' to be one of {', '.join(KINDS)}, got {kind!r}",
            source=source,
            field="kind",
        )
    schema = schema_for(kind)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        # An unknown key first: a wrong unit in a name also makes the right name "missing".
        errors = sorted(exc.errors(), key=lambda e: e.get("type") != "extra_forbidden")
        loc, msg = _describe_error(errors[0], kind)
        extra = len(errors) - 1
        if extra:
            msg += f" (and {extra} more problem{'s' if extra > 1 else ''})"
        raise PlanInputError(msg, source=source, field=loc) from None


def read_profile_file(path: Path) -> ProfileBase:
    source = str(path)
    data = load_toml(path, what="file (a TOML profile)", max_bytes=MAX_PROFILE_BYTES)
    stem = path.stem
    if "id" in data and data["id"] != stem:
        raise PlanInputError(
            f"id {data['id']!r} differs from the file name {stem!r}; the file name is the id",
            source=source,
            field="id",
        )
    data["id"] = stem
    parent = path.parent.name
    # The folder says what kind a profile must be: said first, before its fields are checked
    # against another kind's schema.
    if parent in KINDS and data.get("kind") in KINDS and data["kind"] != parent:
        raise PlanInputError(
            f"{_a(str(data['kind']))} profile in a '{parent}' folder", source=source, field="kind"
        )
    return validate_profile(data, source=source)


def _toml_value(v: object) -> str:
    import json  # (a profile written: a plain size writes none)

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string


def profile_to_toml(profile: ProfileBase, *, only_set: bool = False) -> str:
    """A profile as TOML that :func:`read_profile_file` reads back to the same profile; with
    ``only_set``, without the fields left at their schema defaults (as one writes by hand)."""
    import json

    data = profile.model_dump(mode="json")
    lines = []
    for k, v in data.items():
        if k in ("id", "sources", "unconfirmed", "calibration_stderr") or v is None:
            continue
        if only_set and k not in profile.model_fields_set and k not in ("kind", "name"):
            continue
        lines.append(f"{k} = {_toml_value(v)}")
    for table in ("calibration_stderr", "sources", "unconfirmed"):
        if data[table]:
            lines += ["", f"[{table}]"]
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in data[table].items()]
    return "\n".join(lines) + "\n"


def write_profiles(
    profiles: Sequence[ProfileBase],
    out: Path,
    *,
    field: str,
    only_set: bool = False,
    reads: Sequence[Path] = (),
) -> list[str]:
    """Profiles as a folder ``--profiles DIR`` reads (``out/<kind>/<id>.toml``): every one
    written, each through a temporary file renamed into place, or none (AtomicGroup); none
    of them one of ``reads``, the files the run read."""
    refuse_inputs([(out / p.KIND / f"{p.id}.toml", field) for p in profiles], reads)
    written = []
    with AtomicGroup() as outputs:
        for profile in profiles:
            target = out / profile.KIND / f"{profile.id}.toml"
            outputs.make_dirs(target.parent, field=field)
            outputs.add(target, profile_to_toml(profile, only_set=only_set), field=field)
            written.append(str(target))
    return written


def _profile_files(directory: Path) -> list[Path]:
    """The profile files below ``directory``. An entry named like one that is not a regular
    file (a directory, a broken link, a loop of links) is an error: skipped, the profile it
    was meant to be would silently be the built-in one. So is a folder that cannot be read
    (its profiles were skipped: the built-in node ran, 32.1 instead of 9.29 turns/s) and a
    kind's name that is not a folder."""

    def refuse(exc: OSError) -> None:
        raise PlanInputError(
            f"cannot read: {exc.strerror or exc}",
            source=str(exc.filename or directory),
            field="--profiles",
        )

    for kind in KINDS:
        entry = directory / kind
        if (entry.exists() or entry.is_symlink()) and not entry.is_dir():
            raise PlanInputError(
                f"is not a folder; a {kind} profile goes in {directory}/{kind}/ID.toml",
                source=str(entry),
                field="--profiles",
            )
    for _ in os.walk(directory, onerror=refuse):
        pass  # every folder below listed, or refused
    files = []
    for p in sorted(directory.rglob("*.toml")):
        if not p.is_file():
            raise PlanInputError(
                "is not a profile file (a directory, a broken link or a loop of links)",
                source=str(p),
                field="--profiles",
            )
        files.append(p)
    return files


def _claim(seen: dict[tuple[str, str], Path], kind: str, profile_id: str, path: Path) -> None:
    """``path`` holds ``kind`` ``profile_id``, which no other file of its folder may."""
    first = seen.setdefault((kind, profile_id), path)
    if first != path:
        raise PlanInputError(
            f"{kind} '{profile_id}' is also in {first}; one folder of --profiles holds each "
            "profile once (remove or rename one of them)",
            source=str(path),
            field="--profiles",
        )


class LazyProfiles(MutableMapping[str, ProfileBase]):
    """The profiles of one kind by id: each read from its file and then checked (``check``:
    its references to other profiles) on first access; membership, iteration and length from
    the index alone."""

    def __init__(self, check: Callable[[ProfileBase, Path], None]) -> None:
        self._check = check
        self._paths: dict[str, Path] = {}
        self._loaded: dict[str, ProfileBase] = {}

    def index(self, profile_id: str, path: Path) -> None:
        """Where ``profile_id`` is, to read when first used (shadowing what was there)."""
        self._paths[profile_id] = path
        self._loaded.pop(profile_id, None)

    def __getitem__(self, profile_id: str) -> ProfileBase:
        if profile_id not in self._loaded:
            path = self._paths[profile_id]  # KeyError: no such profile
            profile = read_profile_file(path)
            # Kept before its checks, which may read profiles that refer back to it; dropped
            # again if they fail, so that every use fails alike.
            self._loaded[profile_id] = profile
            try:
                self._check(profile, path)
            except BaseException:
                del self._loaded[profile_id]
                raise
        return self._loaded[profile_id]

    def __setitem__(self, profile_id: str, profile: ProfileBase) -> None:
        self._loaded[profile_id] = profile
        self._paths.pop(profile_id, None)

    def __delitem__(self, profile_id: str) -> None:
        if profile_id not in self:
            raise KeyError(profile_id)
        self._loaded.pop(profile_id, None)
        self._paths.pop(profile_id, None)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._loaded or profile_id in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._paths, *self._loaded]))

    def __len__(self) -> int:
        return len(self._paths.keys() | self._loaded.keys())


def _table_schema(info: Any) -> type[BaseModel] | None:
    """The model a field holds (an OperatorCurve, or one or None), else None."""
    if info is None:
        return None
    for t in (info.annotation, *getattr(info.annotation, "__args__", ())):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def parse_assignment(text: str) -> tuple[str, str, Any]:
    """``KIND.FIELD=VALUE`` -> (kind, field, value). VALUE is read as a TOML value when it
    parses as one (numbers, booleans, quoted strings, arrays), else as a bare string."""
    if "=" not in text:
        raise PlanInputError(f"--set {text!r}: expected KIND.FIELD=VALUE", field="--set")
    key, _, value_text = text.partition("=")
    kind, dot, name = key.strip().partition(".")
    if not dot or not name:
        raise PlanInputError(f"--set {text!r}: expected KIND.FIELD=VALUE", field="--set")
    if kind not in KINDS:
        raise PlanInputError(
            f"--set {text!r}: unknown kind '{kind}'; expected one of {', '.join(KINDS)}",
            field="--set",
        )
    known = schema_for(kind).model_fields
    head, sub_dot, sub = name.partition(".")
    if sub_dot:
        # One field of a table field (an engine profile's curve: engine.moe_fp8.launch_s).
        table = _table_schema(known.get(head))
        if table is None or sub not in table.model_fields:
            choices = [f"{head}.{f}" for f in table.model_fields] if table is not None else []
            close = difflib.get_close_matches(name, choices or list(known), n=1, cutoff=0.6)
            hint = f"; did you mean '{kind}.{close[0]}'?" if close else ""
            raise PlanInputError(
                f"--set: {kind} has no field '{name}'{hint}", field=f"{kind}.{name}"
            )
    elif name in ("kind", "id", "sources", "unconfirmed"):
        # Fields that say what a profile is and where its numbers come from, not a number of
        # the model ("did you mean 'node.id'?" answered node.id itself).
        raise PlanInputError(
            f"--set: {kind}.{name} says what the profile is or where its numbers come from "
            f"and cannot be set; choose another profile (--{kind} ID) or edit its file",
            field=f"{kind}.{name}",
        )
    elif name not in known:
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean '{kind}.{close[0]}'?" if close else ""
        raise PlanInputError(f"--set: {kind} has no field '{name}'{hint}", field=f"{kind}.{name}")
    value_text = value_text.strip()
    if "\n" in value_text or "\r" in value_text:
        raise PlanInputError(
            "expected one value on one line (a line break in a --set value)",
            field=f"{kind}.{name}",
        )
    check_toml_nesting(value_text, source=f"--set {kind}.{name}")
    try:
        value: Any = tomllib.loads(f"v = {value_text}")["v"]
    except tomllib.TOMLDecodeError:
        value = value_text
    except ValueError:  # an integer beyond Python's 4,300 digits of conversion
        raise PlanInputError(
            f"expected a number of at most {MAX_NUMBER_DIGITS:,} digits, got one of "
            f"{len(value_text):,} characters",
            field=f"{kind}.{name}",
        ) from None
    else:
        if has_toml_comment(value_text):
            # 'x=200 # note' was taken as 200, the note dropped: a value is the value alone.
            raise PlanInputError(
                f"expected the value alone, got a comment after it in {value_text!r}",
                field=f"{kind}.{name}",
            )
    if value_text.lower() in ("nan", "+nan", "-nan", "inf", "+inf", "-inf"):
        value = float(value_text)
    huge = huge_integer(value)
    if huge is not None:
        raise PlanInputError(huge, field=f"{kind}.{name}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        # TOML's hexadecimal, octal, binary and digit separators: --set took 0x10 as 16.
        odd = non_decimal(value_text)
        if odd is not None:
            raise PlanInputError(odd, field=f"{kind}.{name}")
    return kind, name, value


# Where a node's calibration comes from is the profile's statement, resolved when the registry
# reads it: a --set could not re-resolve it honestly.
_CALIBRATION_ORIGIN = (
    "says where a profile's calibration comes from and cannot be set on the command line; "
    "edit the profile, or give your own with --profiles DIR"
)
# Fields --set cannot change, and why.
NOT_SETTABLE: dict[tuple[str, str], str] = {
    ("node", "efficiency_source"): _CALIBRATION_ORIGIN,
    ("node", "efficiencies_from"): _CALIBRATION_ORIGIN,
    # Set here, the node's GPU hid that its calibration was measured on another one (the
    # reports say so for --gpu, found in a trial).
    ("node", "gpu"): "is the scenario's --gpu (the reports then say which GPU the nodes' "
    "calibration was measured on): give --gpu",
}


@record
class Overrides:
    """``--set`` assignments grouped by kind: {kind: {field: value}}."""

    by_kind: dict[str, dict[str, Any]] = field(default_factory=dict)

    @staticmethod
    def _add(by_kind: dict[str, dict[str, Any]], kind: str, name: str, value: Any) -> None:
        """Record one assignment; the same field with two different values is an error."""
        if (kind, name) in NOT_SETTABLE:
            raise PlanInputError(
                f"{kind}.{name} {NOT_SETTABLE[kind, name]}", field=f"{kind}.{name}"
            )
        fields = by_kind.setdefault(kind, {})
        if name in fields and fields[name] != value:
            raise PlanInputError(
                f"--set gives {kind}.{name} twice ({fields[name]!r} and {value!r})",
                field=f"{kind}.{name}",
            )
        fields[name] = value

    @classmethod
    def parse(cls, assignments: Iterable[str]) -> Overrides:
        by_kind: dict[str, dict[str, Any]] = {}
        for text in assignments:
            cls._add(by_kind, *parse_assignment(text))
        return cls(by_kind)

    def merged(self, other: Overrides) -> Overrides:
        out = {k: dict(v) for k, v in self.by_kind.items()}
        for kind, fields in other.by_kind.items():
            for name, value in fields.items():
                self._add(out, kind, name, value)
        return Overrides(out)

    def apply(self, profile: P) -> P:
        """The profile with the assignments of its kind: each set field cites ``--set`` and
        loses any standard error its calibration gave it (the value is no longer the fit's)."""
        fields = self.by_kind.get(profile.kind)
        if not fields:
            return profile
        data = profile.model_dump()
        sources = dict(profile.sources)
        for name, value in fields.items():
            head, dot, sub = name.partition(".")
            if not dot:
                data[name] = value
                sources[name] = ["set on the command line (--set)"]
                continue
            if data.get(head) is None:
                raise PlanInputError(
                    f"{profile.kind} '{profile.id}' has no {head} to set {sub} of",
                    field=f"{profile.kind}.{name}",
                )
            data[head] = {**data[head], sub: value}
            sources[head] = [
                *profile.sources.get(head, []),
                f"{sub} set on the command line (--set)",
            ]
        data["sources"] = sources
        heads = {name.partition(".")[0] for name in fields}
        data["unconfirmed"] = {k: v for k, v in profile.unconfirmed.items() if k not in heads}
        data["calibration_stderr"] = {
            k: v for k, v in profile.calibration_stderr.items() if k not in heads
        }
        result = validate_profile(data, source=f"--set on {profile.kind} '{profile.id}'")
        if isinstance(result, WorkloadProfile) and result.trace_file:
            for name in fields:
                if name in WorkloadProfile.TRACE_GIVEN:
                    # Checked and then ignored: the trace's rows give every turn's tokens.
                    raise PlanInputError(
                        f"workload '{profile.id}' reads its turns from {result.trace_file}: "
                        f"its {name} describes the trace and sets nothing (edit the trace, "
                        "or use a profile without trace_file)",
                        field=f"workload.{name}",
                    )
        return result  # type: ignore[return-value]


@dataclass
class Registry:
    """All profiles found on the search path, by kind and id, with where each came from; each
    read and validated when first used."""

    profiles: dict[str, LazyProfiles]
    origins: dict[tuple[str, str], Path]
    search_path: list[Path]
    overrides: Overrides = field(default_factory=Overrides)
    # Every file indexed to be read when used, shadowed ones included (check_all reads them).
    indexed: list[Path] = field(default_factory=list)
    # The kinds of profile a run read through get() (with its --set overrides): shared by the
    # copies dataclasses.replace makes (a sweep's registry per combination of profile values).
    kinds_read: set[str] = field(default_factory=set)

    def unused_overrides(self) -> list[str]:
        """The ``--set`` assignments (``KIND.FIELD``) of a kind the run read no profile of:
        an engine curve's field on a run whose nodes have no engine profile, a storage field
        with ``--storage none``; each set nothing (it was dropped silently)."""
        return [
            f"{kind}.{name}"
            for kind, fields in self.overrides.by_kind.items()
            if kind not in self.kinds_read
            for name in fields
        ]

    @classmethod
    def load(
        cls,
        extra_dirs: Sequence[Path | str] = (),
        *,
        overrides: Overrides | None = None,
        use_env: bool = True,
    ) -> Registry:
        dirs: list[Path] = [builtin_profiles_dir()]
        if use_env and os.environ.get(ENV_VAR):
            dirs += [Path(p) for p in os.environ[ENV_VAR].split(os.pathsep) if p]
        dirs += [Path(d) for d in extra_dirs]
        registry = cls({}, {}, dirs, overrides or Overrides())
        registry.profiles = {k: LazyProfiles(registry._check) for k in KINDS}
        read_now: list[tuple[ProfileBase, Path]] = []
        for directory in dirs:
            if not directory.is_dir():
                raise PlanInputError(
                    "no such profile directory", source=str(directory), field="--profiles"
                )
            # A later folder shadows an earlier one on purpose; inside one folder a second
            # file of the same kind and id shadowed the first silently, by the order of names.
            here: dict[tuple[str, str], Path] = {}
            for path in _profile_files(directory):
                # A kind's folder says the kind and the file name the id: read when used.
                # Elsewhere the file says its kind, so it is read now.
                if path.parent.name in KINDS:
                    _claim(here, path.parent.name, path.stem, path)
                    registry.indexed.append(path)
                    registry.profiles[path.parent.name].index(path.stem, path)
                    registry.origins[(path.parent.name, path.stem)] = path
                    continue
                profile = read_profile_file(path)
                _claim(here, profile.kind, profile.id, path)
                registry.profiles[profile.kind][profile.id] = profile
                registry.origins[(profile.kind, profile.id)] = path
                read_now.append((profile, path))
        # Their references once every file is indexed (a node may name a gpu found later).
        for profile, path in read_now:
            if registry.origins[(profile.kind, profile.id)] == path:
                registry._check(profile, path)
        return registry

    def _check(self, profile: ProfileBase, path: Path) -> None:
        """A profile's references to others, once read: a node's gpu and transfer source."""
        if isinstance(profile, NodeProfile):
            self.check_node(profile, str(path))

    def check_all(self) -> None:
        """Read and validate every profile file, shadowed ones included, and every winning
        node's references: the first bad one is a PlanInputError naming its file and field."""
        winners = {self.origins.get((path.parent.name, path.stem)) for path in self.indexed}
        for path in self.indexed:
            if path not in winners:
                read_profile_file(path)  # shadowed: its schema only
        for kind in KINDS:
            for profile_id in self.ids(kind):
                self.profiles[kind][profile_id]

    def check_node(self, node: NodeProfile, source: str) -> None:
        """A node's references: its gpu, its engine, and the measured node a transfer names."""
        self._check_gpu_ref(node, source)
        if node.engine is not None and node.engine not in self.profiles["engine"]:
            raise PlanInputError(
                f"names engine '{node.engine}', which no engine profile has; known: "
                + ", ".join(sorted(self.profiles["engine"])),
                source=source,
                field="engine",
            )
        if node.efficiency_source == "transferred":
            self._transfer_source(node, source)

    def _transfer_source(self, node: NodeProfile, source: str) -> NodeProfile:
        """The measured node a transferred node takes its calibration from."""
        origin = self.profiles["node"].get(node.efficiencies_from or "")
        if not isinstance(origin, NodeProfile) or origin.efficiency_source != "measured":
            what = (
                f"whose efficiency_source is '{origin.efficiency_source}', not 'measured'"
                if isinstance(origin, NodeProfile)
                else "which no node profile has"
            )
            raise PlanInputError(
                f"efficiencies_from names '{node.efficiencies_from}', {what}",
                source=source,
                field="efficiencies_from",
            )
        return origin

    def _transferred(self, node: NodeProfile) -> NodeProfile:
        """``node`` with the calibration fields it does not set taken from its
        ``efficiencies_from`` node, with their sources and standard errors (docs/model.md
        section 6)."""
        if node.efficiency_source != "transferred":
            return node
        origin = self._transfer_source(node, str(self.origins.get(("node", node.id), node.id)))
        taken = [
            f
            for f in NodeProfile.CALIBRATION_FIELDS
            if f in origin.model_fields_set and f not in node.model_fields_set
        ]
        if not taken:
            return node
        data = node.model_dump(exclude_unset=True)
        data.update({f: getattr(origin, f) for f in taken})
        data["sources"] = {
            **node.sources,
            **{
                f: [TRANSFERRED_FROM.format(origin.id) + s for s in origin.sources.get(f, [])]
                for f in taken
            },
        }
        data["unconfirmed"] = {
            **node.unconfirmed,
            **{
                f: f"Transferred from node '{origin.id}' ({origin.name}), not measured on this "
                "node. " + origin.unconfirmed.get(f, "")
                for f in taken
            },
        }
        data["calibration_stderr"] = {
            **{f: v for f, v in origin.calibration_stderr.items() if f in taken},
            **node.calibration_stderr,
        }
        data["kind"] = "node"
        return validate_profile(  # type: ignore[return-value]
            data, source=f"node '{node.id}' with the calibration of '{origin.id}'"
        )

    def _check_gpu_ref(self, node: NodeProfile | EngineProfile, source: str) -> None:
        if node.gpu not in self.profiles["gpu"]:
            raise PlanInputError(
                f"names gpu '{node.gpu}', which no gpu profile has; known: "
                + ", ".join(sorted(self.profiles["gpu"])),
                source=source,
                field="gpu",
            )

    def ids(self, kind: str) -> list[str]:
        return sorted(self.profiles[kind])

    def raw(self, kind: str, profile_id: str) -> ProfileBase:
        """The profile as stored, without ``--set`` overrides."""
        try:
            return self.profiles[kind][profile_id]
        except KeyError:
            known = self.ids(kind)
            close = difflib.get_close_matches(profile_id, known, n=1, cutoff=0.5)
            hint = f"did you mean '{close[0]}'? " if close else ""
            if profile_id.lower().endswith(".toml") or "/" in profile_id or "\\" in profile_id:
                # A file given where an id is asked: say how a profile file is used.
                path = Path(profile_id)
                folder = path.parent.parent if path.parent.name == kind else path.parent
                hint = (
                    f"a profile is named by its id: give its folder and its id, "
                    f"--profiles {folder} --{kind} {path.stem}; "
                )
            raise PlanInputError(
                f"unknown {kind} profile '{profile_id}'; {hint}known: {', '.join(known)}",
                field=f"--{kind}",
            ) from None

    def find(self, profile_id: str) -> ProfileBase:
        """A profile by id alone, whatever its kind (ids are unique across kinds in practice)."""
        hits = [self.profiles[k][profile_id] for k in KINDS if profile_id in self.profiles[k]]
        if len(hits) == 1:
            return self.get(hits[0].kind, hits[0].id)
        if hits:
            kinds = ", ".join(h.kind for h in hits)
            raise PlanInputError(
                f"id '{profile_id}' is a profile of several kinds ({kinds}); use --kind",
                field="ID",
            )
        everything = [i for k in KINDS for i in self.profiles[k]]
        close = difflib.get_close_matches(profile_id, everything, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise PlanInputError(f"unknown profile '{profile_id}'{hint}", field="ID")

    def resolved(self, kind: str, profile_id: str) -> ProfileBase:
        """The profile as stored, a node with its transferred calibration applied."""
        profile = self.raw(kind, profile_id)
        return self._transferred(profile) if isinstance(profile, NodeProfile) else profile

    def get(self, kind: str, profile_id: str) -> ProfileBase:
        """The profile with its transferred calibration and ``--set`` overrides applied."""
        self.kinds_read.add(kind)
        profile = self.overrides.apply(self.resolved(kind, profile_id))
        if isinstance(profile, NodeProfile):
            self._check_gpu_ref(profile, f"node '{profile.id}'")
        elif isinstance(profile, EngineProfile):
            origin = self.origins.get(("engine", profile.id))
            self._check_gpu_ref(profile, str(origin) if origin else f"engine '{profile.id}'")
        return profile

    def model_by_hf_name(self, hf_name: str) -> ModelProfile | None:
        """The model profile that lists ``hf_name`` (a Hugging Face repository, compared
        without regard to case, as the Hub does) in ``hf_names``; None if none does. Two
        profiles listing it is an error naming both."""
        wanted = hf_name.strip().casefold()
        hits = [
            pid
            for pid in self.ids("model")
            if any(n.casefold() == wanted for n in self.resolved("model", pid).hf_names)  # type: ignore[attr-defined]
        ]
        if len(hits) > 1:
            raise PlanInputError(
                f"Hugging Face name {hf_name!r} is listed by several model profiles "
                f"({', '.join(hits)}); keep it in one profile's hf_names",
                field="hf_names",
            )
        return self.model(hits[0]) if hits else None

    def hf_names(self) -> list[str]:
        """Every Hugging Face name the model profiles list, sorted."""
        return sorted(
            n
            for pid in self.ids("model")
            for n in self.resolved("model", pid).hf_names  # type: ignore[attr-defined]
        )

    # Typed accessors --------------------------------------------------------------------
    def gpu(self, profile_id: str) -> GpuProfile:
        return self.get("gpu", profile_id)  # type: ignore[return-value]

    def node(self, profile_id: str) -> NodeProfile:
        return self.get("node", profile_id)  # type: ignore[return-value]

    def storage(self, profile_id: str) -> StorageProfile:
        return self.get("storage", profile_id)  # type: ignore[return-value]

    def model(self, profile_id: str) -> ModelProfile:
        return self.get("model", profile_id)  # type: ignore[return-value]

    def workload(self, profile_id: str) -> WorkloadProfile:
        return self.get("workload", profile_id)  # type: ignore[return-value]

    def engine(self, profile_id: str) -> EngineProfile:
        return self.get("engine", profile_id)  # type: ignore[return-value]

    def gpu_of(self, node: NodeProfile) -> GpuProfile:
        return self.gpu(node.gpu)

    def engine_of(self, node: NodeProfile) -> EngineProfile | None:
        """The engine profile that times ``node``'s passes and steps operator by operator, or
        None (the node's own one-MFU calibration)."""
        return self.engine(node.engine) if node.engine is not None else None
