"""How the reports write numbers: one place for each format they share."""

from __future__ import annotations

import math


def finite(v: float) -> float | None:
    """A number for JSON: itself, or null where it is not finite (no NaN or inf in output)."""
    return v if math.isfinite(v) else None


def seconds(v: float) -> str:
    """A duration: hours from an hour up, whole seconds from a minute up, else 2 decimals."""
    if v >= 3600:
        return f"{v / 3600:.2f} h"
    if v >= 60:
        return f"{v:,.0f} s"
    return f"{v:.2f} s"


def per_token(v: float) -> str:
    """A time per token (or a short wait): ms below a second, else seconds."""
    return f"{v:,.2f} s" if v >= 1 else f"{v * 1e3:.1f} ms"


def gbyte(g: float) -> str:
    """GB, or TB from a thousand GB up."""
    return f"{g / 1e3:,.2f} TB" if g >= 1e3 else f"{g:,.1f} GB"


def count(n: float, noun: str, fmt: str = ",") -> str:
    """A count and its noun, singular for exactly one: "1 agent", "2,048 agents", "1.5 turns"."""
    return f"{n:{fmt}} {noun}{'' if n == 1 else 's'}"
