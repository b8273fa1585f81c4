"""Derived quantities of a profile, for ``profiles show``: computed, never typed in."""

from __future__ import annotations

from dualpath_plan.frozen import record
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.links import NicRates
from dualpath_plan.physics.workload import turn_mix
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import (
    GpuProfile,
    ModelProfile,
    NodeProfile,
    ProfileBase,
    WorkloadProfile,
)


@record
class Derived:
    name: str
    value: float
    unit: str
    how: str


def derived_quantities(profile: ProfileBase, registry: Registry) -> list[Derived]:
    if isinstance(profile, GpuProfile):
        return [
            Derived(
                "pcie_raw_gbyte_s",
                profile.pcie_raw_gbyte_s,
                "GB/s per direction",
                "GT/s per lane x lanes / 8",
            ),
            Derived(
                "pcie_usable_gbyte_s",
                profile.pcie_usable_gbyte_s,
                "GB/s per direction",
                "raw x line-encoding efficiency (128b/130b; Gen6 FLIT 242/256)",
            ),
        ]
    if isinstance(profile, NodeProfile):
        return [
            Derived(
                "cnic_total_gbyte_s",
                profile.cnic_count * NicRates.of(profile).cnic_line / 1e9,
                "GB/s per direction",
                "cnic_count x cnic_gbit_s / 8",
            ),
            Derived(
                "snic_total_gbyte_s",
                NicRates.of(profile).snic_line / 1e9,
                "GB/s per direction",
                "snic_count x snic_gbit_s / 8",
            ),
            Derived(
                "cnic_pcie_usable_gbyte_s",
                profile.cnic_pcie_usable_gbyte_s,
                "GB/s per direction per CNIC",
                "CNIC PCIe generation and lanes",
            ),
            Derived(
                "snic_per_cnic",
                NicRates.of(profile).snic_per_cnic,
                "",
                "the paper's s: node storage bandwidth in units of one CNIC",
            ),
        ]
    if isinstance(profile, ModelProfile):
        p = phys.param_counts(profile)
        out = [
            Derived(
                "kv_bytes_per_token_layer",
                phys.kv_bytes_per_token_layer(profile),
                "B",
                "main attention cache, one layer",
            ),
            Derived(
                "kv_bytes_per_token",
                phys.kv_bytes_per_token(profile),
                "B",
                "all full-attention layers (+ indexer cache if loaded)",
            ),
            Derived(
                "active_params_billions", p.active / 1e9, "1e9", "layers' active weights + lm_head"
            ),
            Derived("total_params_billions", p.total / 1e9, "1e9", "all weights incl. embeddings"),
            Derived("weight_gbyte", phys.weight_bytes(profile) / 1e9, "GB", "at weight dtypes"),
            Derived(
                "prefill_gflop_per_token_at_32k",
                float(phys.prefill_flops(profile, 32768, 1)) / 1e9,
                "GFLOP",
                "one appended token after 32,768 cached",
            ),
        ]
        if profile.has_dsa:
            out.insert(
                2,
                Derived(
                    "indexer_bytes_per_token_layer",
                    phys.indexer_bytes_per_token_layer(profile),
                    "B",
                    "DSA indexer key cache, one layer",
                ),
            )
        return out
    if isinstance(profile, WorkloadProfile):
        if profile.trace_file:
            return _trace_quantities(profile, registry)
        return [Derived("hit_rate", profile.hit_rate, "", "context / (context + append)")]
    return []


def _trace_quantities(workload: WorkloadProfile, registry: Registry) -> list[Derived]:
    """A trace workload's statistics from its trace (what every command runs on), not the
    profile's means."""
    mix = turn_mix(workload, profile_path=registry.origins.get(("workload", workload.id)))
    counts = mix.trajectory_turns
    src = f"from {workload.trace_file}"
    return [
        Derived("trace_turns", float(mix.weight.size), "turns", f"{src}: its rows"),
        Derived(
            "trace_turns_per_trajectory",
            counts.mean,
            "turns",
            f"{src}: the mean of each trajectory's count",
        ),
        Derived("trace_longest_trajectory", counts.longest, "turns", f"{src}: the most turns"),
        Derived(
            "trace_context_tokens",
            mix.mean(mix.cached_tokens),
            "tokens",
            f"{src}: mean cached context per turn",
        ),
        Derived(
            "trace_append_tokens", mix.mean(mix.append_tokens), "tokens", f"{src}: mean per turn"
        ),
        Derived(
            "trace_generated_tokens",
            mix.mean(mix.generated_tokens),
            "tokens",
            f"{src}: mean per turn",
        ),
        Derived(
            "hit_rate",
            mix.hit_rate,
            "",
            f"{src}: cached / (cached + appended) tokens; the commands run on the trace's "
            "rows, not on the means above",
        ),
    ]
