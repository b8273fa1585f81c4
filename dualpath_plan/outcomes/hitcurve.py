"""``workload hitcurve``: a trace's prefix-cache hit rate against LRU capacity
(:mod:`dualpath_plan.physics.hitcurve`), at the capacities asked for and split over an ordered
list of cache tiers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.workload_import import trace_files
from dualpath_plan.physics.hitcurve import BlockCollector, HitCurve, hit_curve
from dualpath_plan.physics.traces import ImportOptions, read_trace
from dualpath_plan.units import BYTE_UNITS, MIN_BYTES

# Block size in tokens for the formats without hashes (csv, burstgpt): vLLM's default KV block
# (docs.vllm.ai, CacheConfig.block_size = 16), as the Bailian default here.
HASHLESS_BLOCK_SIZE = 16
MAX_CAPACITY_BLOCKS = 1 << 50
_CAPACITY = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*")


@record
class Tier:
    """A tier as given: its name and its capacity, in blocks or in bytes."""

    name: str
    blocks: int | None
    bytes: float | None


@record
class HitCurveResult:
    format: str
    sources: tuple[str, ...]
    model: str
    kv_bytes_per_token: float
    curve: HitCurve
    asked: tuple[int, ...]  # --blocks
    notes: tuple[str, ...]

    @property
    def block_bytes(self) -> float:
        return self.kv_bytes_per_token * self.curve.block_size


def parse_blocks(text: str | None) -> tuple[int, ...]:
    """``--blocks 1000,20000``: capacities in blocks."""
    if text is None:
        return ()
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) > MAX_CAPACITY_BLOCKS:
            raise PlanInputError(
                f"expected whole block counts from 0 to 2**50 separated by commas, got {part!r}",
                field="--blocks",
            )
        out.append(int(part))
    return tuple(out)


def parse_tiers(text: str | None) -> tuple[Tier, ...]:
    """``--tiers hbm:20000,dram:512GB,ssd:30TB``: names and capacities, top tier first; a bare
    number is blocks, one with a unit (B, KB, MB, GB, TB, PB; KiB to PiB) bytes."""
    if text is None:
        return ()
    out: list[Tier] = []
    for item in text.split(","):
        name, _, size = item.strip().partition(":")
        match = _CAPACITY.fullmatch(size)
        unit = match.group(2).upper() if match else ""
        if not name or match is None or (unit and unit not in BYTE_UNITS):
            raise PlanInputError(
                f"expected NAME:CAPACITY (blocks, or bytes with a unit: 512GB, 30TB), got "
                f"{item.strip()!r}",
                field="--tiers",
            )
        if name in (t.name for t in out):
            raise PlanInputError(f"tier {name!r} given twice", field="--tiers")
        value = float(match.group(1))
        if unit:
            size_bytes = value * BYTE_UNITS[unit]
            if not MIN_BYTES <= size_bytes <= 1e21:
                raise PlanInputError(
                    f"expected a size from 1 B to 1 ZB, got {size!r}", field="--tiers"
                )
            out.append(Tier(name, None, size_bytes))
        else:
            if value != int(value) or not 0 < value <= MAX_CAPACITY_BLOCKS:
                raise PlanInputError(
                    f"expected a whole block count from 1 to 2**50, got {size!r} (or give bytes "
                    "with a unit: 512GB)",
                    field="--tiers",
                )
            out.append(Tier(name, int(value), None))
    return tuple(out)


def tier_blocks(tier: Tier, block_bytes: float) -> int:
    """A tier's capacity in whole blocks (bytes over the KV bytes of one block, rounded down)."""
    if tier.blocks is not None:
        return tier.blocks
    assert tier.bytes is not None
    return min(int(tier.bytes // block_bytes), MAX_CAPACITY_BLOCKS)


def hitcurve(
    paths: Sequence[Path],
    options: ImportOptions,
    *,
    model: str,
    kv_bytes_per_token: float,
    capacities: Sequence[int] = (),
    tiers: Sequence[Tier] = (),
) -> HitCurveResult:
    """Read a trace (every format of ``workload import``) and compute its hit curve."""
    files = trace_files(paths, options)
    hashless = options.format in ("csv", "burstgpt")
    read_options = options
    if hashless and options.block_size is not None:
        # the block size is the curve's here, not the format's (which has no hashes)
        read_options = ImportOptions(options.format, None, options.session_field)
        if not 1 <= options.block_size <= 1 << 20:
            raise PlanInputError(
                f"expected a block size from 1 to {1 << 20:,} tokens, got {options.block_size}",
                field="--block-size",
            )
    read = read_trace(files, read_options)
    collector: BlockCollector | None = None
    for turn in read.turns:
        if collector is None:
            # (kv-cache-tester states its block size in each file: known once one is read)
            block = (options.block_size or HASHLESS_BLOCK_SIZE) if hashless else read.block_size
            assert block is not None
            collector = BlockCollector(block)
        collector.add(turn)
    if collector is None:
        raise PlanInputError("no requests in the trace", source=", ".join(read.sources))
    block_bytes = kv_bytes_per_token * collector.block
    sized = [(t.name, tier_blocks(t, block_bytes)) for t in tiers]
    for (name, blocks), t in zip(sized, tiers, strict=True):
        if blocks < 1:
            raise PlanInputError(
                f"tier {name!r}: {t.bytes:,.0f} B holds no {block_bytes:,.0f}-byte block "
                f"({collector.block} tokens of {model})",
                field="--tiers",
            )
    curve = hit_curve(collector.trace(), sized)
    notes = list(read.notes)
    if hashless:
        notes.append(
            f"no block hashes: blocks of {collector.block} tokens derived from each session's "
            "growing prefix (a block is shared with the previous request when wholly within "
            "the context the import counts as cached; a response's blocks are written too)"
        )
    return HitCurveResult(
        format=options.format,
        sources=read.sources,
        model=model,
        kv_bytes_per_token=kv_bytes_per_token,
        curve=curve,
        asked=tuple(capacities),
        notes=tuple(notes),
    )
