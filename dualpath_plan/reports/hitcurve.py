"""The ``workload hitcurve`` report: hit rates at the capacities asked for, per tier, the whole
curve as CSV rows (one per step) or an SVG chart."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.files import xml_text
from dualpath_plan.formatting import gbyte, percent
from dualpath_plan.outcomes.hitcurve import HitCurveResult

CSV_COLUMNS = (
    "capacity_blocks",
    "capacity_bytes",
    "hit_blocks",
    "block_hit_rate",
    "hit_tokens",
    "token_hit_rate",
)


def _rate(hit: float, total: float) -> float:
    return hit / total if total else 0.0


def _points(result: HitCurveResult) -> list[dict[str, Any]]:
    c = result.curve
    blocks = c.blocks_at(result.asked)
    tokens = c.tokens_at(result.asked)
    return [
        {
            "capacity_blocks": cap,
            "capacity_bytes": cap * result.block_bytes,
            "hit_blocks": int(b),
            "block_hit_rate": _rate(int(b), c.accesses),
            "hit_tokens": int(t),
            "token_hit_rate": _rate(int(t), c.input_tokens),
        }
        for cap, b, t in zip(result.asked, blocks, tokens, strict=True)
    ]


def hitcurve_payload(result: HitCurveResult) -> dict[str, Any]:
    c = result.curve
    return {
        "format": result.format,
        "files": list(result.sources),
        "block_size": c.block_size,
        "model": result.model,
        "kv_bytes_per_token": result.kv_bytes_per_token,
        "block_bytes": result.block_bytes,
        "requests": c.requests,
        "prompt_blocks": c.accesses,
        "blocks_touched": c.touched,
        "distinct_blocks": c.distinct,
        "distinct_bytes": c.distinct * result.block_bytes,
        "input_tokens": c.input_tokens,
        "infinite": {
            "hit_blocks": int(c.hit_blocks[-1]),
            "block_hit_rate": _rate(int(c.hit_blocks[-1]), c.accesses),
            "hit_tokens": int(c.hit_tokens[-1]),
            "token_hit_rate": _rate(int(c.hit_tokens[-1]), c.input_tokens),
        },
        "at": _points(result),
        "tiers": [
            {
                "name": t.name,
                "capacity_blocks": t.capacity_blocks,
                "capacity_bytes": t.capacity_blocks * result.block_bytes,
                "cumulative_blocks": t.cumulative_blocks,
                "served_blocks": t.served_blocks,
                "served_block_share": _rate(t.served_blocks, c.accesses),
                "served_tokens": t.served_tokens,
                "served_token_share": _rate(t.served_tokens, c.input_tokens),
                "block_hit_rate_through": _rate(t.hit_blocks_through, c.accesses),
                "token_hit_rate_through": _rate(t.hit_tokens_through, c.input_tokens),
            }
            for t in result.curve.tiers
        ],
        "curve_steps": int(c.capacity.size),
        "notes": list(result.notes),
    }


def render_hitcurve(result: HitCurveResult, console: Console) -> None:
    c = result.curve
    gb = result.block_bytes / 1e9
    files = ", ".join(result.sources[:3]) + (
        f" and {len(result.sources) - 3} more" if len(result.sources) > 3 else ""
    )
    console.print(
        escape(
            f"{result.format} trace {files}: {c.requests:,} requests, {c.accesses:,} prompt "
            f"blocks of {c.block_size} tokens ({gbyte(gb)} each for {result.model}), "
            f"{c.distinct:,} distinct ({gbyte(c.distinct * gb)})"
        )
    )
    console.print(
        f"infinite cache: {percent(_rate(int(c.hit_blocks[-1]), c.accesses), 1)} of blocks, "
        f"{percent(_rate(int(c.hit_tokens[-1]), c.input_tokens), 1)} of prompt tokens hit"
    )
    if result.asked:
        table = Table(title="LRU prefix cache of a given capacity")
        for col in ("blocks", "KV", "block hit rate", "token hit rate"):
            table.add_column(col, justify="right")
        for p in _points(result):
            table.add_row(
                f"{p['capacity_blocks']:,}",
                gbyte(p["capacity_bytes"] / 1e9),
                percent(p["block_hit_rate"], 1),
                percent(p["token_hit_rate"], 1),
            )
        console.print(table)
    if c.tiers:
        table = Table(title="tiers, top first (one LRU stack)")
        for col in ("tier", "blocks", "KV", "serves blocks", "serves tokens", "hit through"):
            table.add_column(col, justify="left" if col == "tier" else "right")
        for t in c.tiers:
            table.add_row(
                escape(t.name),
                f"{t.capacity_blocks:,}",
                gbyte(t.capacity_blocks * gb),
                percent(_rate(t.served_blocks, c.accesses), 1),
                percent(_rate(t.served_tokens, c.input_tokens), 1),
                percent(_rate(t.hit_tokens_through, c.input_tokens), 1),
            )
        console.print(table)
        console.print(
            "serves: the share of prompt blocks (tokens) found in the tier; hit through: the "
            "token hit rate with this tier and those above it"
        )
    for note in result.notes:
        console.print(escape(f"note: {note}"))


def curve_csv_lines(result: HitCurveResult) -> Iterator[str]:
    """The whole curve, one row per step (the hits stay the same until the next row)."""
    c = result.curve
    yield ",".join(CSV_COLUMNS) + "\n"
    rows = zip(c.capacity.tolist(), c.hit_blocks.tolist(), c.hit_tokens.tolist(), strict=True)
    for cap, b, t in rows:
        yield (
            f"{cap},{cap * result.block_bytes:.17g},{b},{_rate(b, c.accesses):.17g},{t},"
            f"{_rate(t, c.input_tokens):.17g}\n"
        )


def curve_svg(result: HitCurveResult, width: int = 800, height: int = 420) -> str:
    """Token and block hit rate against capacity (GB of KV, log scale), as steps."""
    c = result.curve
    left, right, top, bottom = 70, 30, 40, 50
    gb = result.block_bytes / 1e9
    caps = c.capacity[1:].astype(np.float64) * gb
    lo = 10 ** math.floor(math.log10(caps[0])) if caps.size else 1.0
    hi = 10 ** math.ceil(math.log10(caps[-1] * 1.0001)) if caps.size else 10.0
    hi = max(hi, lo * 10)

    def xp(v: float) -> float:
        v = min(max(v, lo), hi)
        return left + (width - left - right) * math.log10(v / lo) / math.log10(hi / lo)

    def yp(v: float) -> float:
        return height - bottom - (height - top - bottom) * v

    title = xml_text(
        f"{result.format} trace: LRU prefix-cache hit rate against capacity "
        f"({c.block_size}-token blocks, {result.model})"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
    ]
    decade = lo
    while decade <= hi * 1.0001:
        out.append(
            f'<line x1="{xp(decade):.1f}" y1="{height - bottom}" x2="{xp(decade):.1f}" '
            f'y2="{top}" stroke="#eee"/><text x="{xp(decade):.1f}" y="{height - bottom + 16}" '
            f'text-anchor="middle">{xml_text(gbyte(decade))}</text>'
        )
        decade *= 10
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{left}" y1="{yp(v):.1f}" x2="{width - right}" y2="{yp(v):.1f}" '
            f'stroke="#eee"/><text x="{left - 6}" y="{yp(v) + 4:.1f}" text-anchor="end">'
            f"{v:.0%}</text>"
        )
    out.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">'
        "capacity (KV bytes, log scale)</text>"
    )
    for hits, total, color, label in (
        (c.hit_tokens, c.input_tokens, "#1f77b4", "token hit rate"),
        (c.hit_blocks, c.accesses, "#d62728", "block hit rate"),
    ):
        points = [f"{xp(lo):.1f},{yp(0.0):.1f}"]
        prev = 0.0
        # one point per pixel column at most: the steps of a long trace are many
        step = max(1, caps.size // (width - left - right))
        for i in range(0, caps.size, step):
            x = xp(float(caps[i]))
            rate = _rate(float(hits[i + 1]), total)
            points.append(f"{x:.1f},{yp(prev):.1f} {x:.1f},{yp(rate):.1f}")
            prev = rate
        last = _rate(float(hits[-1]), total)
        points.append(f"{xp(hi):.1f},{yp(last):.1f}")
        out.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
            f'points="{" ".join(points)}"><title>{label}</title></polyline>'
        )
    out.append(
        f'<text x="{left + 10}" y="{top + 14}" fill="#1f77b4">token hit rate</text>'
        f'<text x="{left + 10}" y="{top + 30}" fill="#d62728">block hit rate</text>'
    )
    out.append("</svg>\n")
    return "\n".join(out)
