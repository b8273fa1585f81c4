"""What each physical quantity plausibly is, in its unit, and the unit slips that put a value
outside: one table, read by every way a number comes in (command-line flags, ``--set``, profile
files, traces, AIConfigurator imports), so that the same slip gets the same message everywhere.

A schema's bounds (``profiles/schemas.py``: 1e-9 to 1e12 of a unit) keep the arithmetic finite;
they take ``--ttft-slo 4000`` (milliseconds typed where seconds are asked) and a NIC of 400e9
Gb/s (bits per second typed where Gb/s are asked), and the tool then plans, without a word, for a
TTFT of an hour and a NIC of 4e20 bit/s. The ranges here are what any deployment has, with a
generous margin for the next generations (the largest NIC shipping is 800 Gb/s, the range allows
16,000; the B300's 8 TB/s of HBM, 100); outside, the value is refused, with the likely slip and
the value it would have meant ("4000 s: a TTFT SLO is in seconds; did you mean 4?").

Ranges cite what sets them; a quantity with no unit to slip (a count of layers) has its range
and no suggestion.
"""

from __future__ import annotations

import math

from dualpath_plan.frozen import record


@record
class Slip:
    """A unit a user may have typed instead of the one asked: ``typed x factor`` is the value
    in the asked unit (milliseconds typed for seconds: factor 1e-3)."""

    unit: str
    factor: float


@record
class Quantity:
    """A quantity's name (for a message: "a TTFT SLO"), its unit (symbol and words), the
    range any deployment has, and the slips that lead outside it."""

    what: str
    unit: str
    unit_words: str
    low: float
    high: float
    slips: tuple[Slip, ...] = ()
    why: str = ""  # what sets the range (its source)

    def problem(self, value: float) -> str | None:
        """Why ``value`` is implausible (the likely slip and what it would have meant), or
        None if it is plausible."""
        if not math.isfinite(value):
            return None  # a schema's own finiteness check says so, in its words
        if self.low <= value <= self.high:
            return None
        meant = [
            (slip, value * slip.factor)
            for slip in self.slips
            if self.low <= value * slip.factor <= self.high
        ]
        unit = f" {self.unit}" if self.unit else ""
        span = f"{_num(self.low)} to {_num(self.high)}{unit}"
        head = f"{_num(value)}{unit}: outside what {self.what} is ({span})"
        if meant:
            options = " or ".join(
                f"{_num(v)} ({s.unit} typed for {self.unit_words})" for s, v in meant
            )
            return f"{head}; did you mean {options}?"
        return f"{head}; a unit slip or a corrupt value?"


def _num(value: float) -> str:
    """A value as a user would type it: no exponent from 1e-4 to 1e7."""
    if value == 0:
        return "0"
    if 1e-4 <= abs(value) < 1e7:
        text = f"{value:.6g}"
        if "e" in text:
            text = f"{value:.6f}".rstrip("0").rstrip(".")
        return text
    return f"{value:.6g}"


MS = Slip("milliseconds", 1e-3)
US = Slip("microseconds", 1e-6)
BIT_S = Slip("bit/s", 1e-9)  # bits per second typed for Gb/s
BYTES_AS_GB = Slip("bytes", 1e-9)  # bytes (or B/s) typed for GB (or GB/s)
MB_AS_GB = Slip("MB", 1e-3)
GB_S_AS_TB_S = Slip("GB/s", 1e-3)
B_S_AS_TB_S = Slip("B/s", 1e-12)
KW_AS_W = Slip("kW", 1e3)
MW_AS_W = Slip("mW", 1e-3)
FLOPS_AS_TFLOPS = Slip("FLOP/s", 1e-12)
PERCENT = Slip("percent", 1e-2)


def _efficiency(what: str) -> Quantity:
    return Quantity(
        what, "", "a share of 1", 1e-6, 1.0, (PERCENT,), "an achieved share of a datasheet rate"
    )


_NIC = "per NIC; the fastest shipping is 800 Gb/s (ConnectX-8), with room for 16x"
_LATENCY = "a fixed time per layer or collective: microseconds in any engine, 100 ms at most"

QUANTITIES: dict[str, Quantity] = {
    # --- serving targets (flags, validation cases, baselines) ---
    "ttft_slo_s": Quantity(
        "a TTFT SLO",
        "s",
        "seconds",
        1e-3,
        600.0,
        (MS,),
        "the paper's 4 s (section 7.3); 10 minutes before a first token serves no one",
    ),
    "tpot_slo_s": Quantity(
        "a TPOT SLO",
        "s",
        "seconds",
        1e-5,
        10.0,
        (MS, US),
        "the paper's 50 ms (section 7.3); 10 s per token serves no one",
    ),
    "max_utilization": Quantity(
        "a utilization cap", "", "a share of 1", 1e-6, 1.0, (PERCENT,), "0 < U <= 1"
    ),
    # --- node ---
    "node.snic_efficiency": _efficiency("the storage NIC efficiency"),
    "node.cnic_efficiency": _efficiency("the compute NIC efficiency"),
    "node.pcie_efficiency": _efficiency("the PCIe efficiency"),
    "node.dram_efficiency": _efficiency("the DRAM efficiency"),
    "node.decode_hbm_efficiency": _efficiency("the decode HBM efficiency"),
    "node.ep_link_efficiency": _efficiency("the expert-parallel link efficiency"),
    "node.prefill_mfu": _efficiency("the prefill MFU"),
    "node.snic_gbit_s": Quantity(
        "a storage NIC's line rate", "Gb/s", "Gb/s", 1.0, 16_000.0, (BIT_S,), _NIC
    ),
    "node.cnic_gbit_s": Quantity(
        "a compute NIC's line rate", "Gb/s", "Gb/s", 1.0, 16_000.0, (BIT_S,), _NIC
    ),
    "node.snic_count": Quantity("a node's storage NICs", "NICs", "NICs", 1, 64),
    "node.cnic_count": Quantity("a node's compute NICs", "NICs", "NICs", 1, 64),
    "node.gpus_per_node": Quantity(
        "a node's GPUs",
        "GPUs",
        "GPUs",
        1,
        1024,
        (),
        "8 in a DGX, 72 in an NVL72 rack; 1,024 leaves room",
    ),
    "node.dram_gbyte": Quantity(
        "a node's host DRAM",
        "GB",
        "GB",
        1.0,
        100_000.0,
        (BYTES_AS_GB,),
        "2 TB in a DGX H200; 100 TB leaves room",
    ),
    "node.dram_gbyte_s": Quantity(
        "a node's DRAM bandwidth",
        "GB/s",
        "GB/s",
        1.0,
        100_000.0,
        (BYTES_AS_GB,),
        "about 600 GB/s for two sockets of DDR5",
    ),
    "node.prefill_hbm_reserve_gbyte": Quantity(
        "an HBM reserve", "GB", "GB", 0.0, 10_000.0, (BYTES_AS_GB,), "at most a GPU's HBM"
    ),
    "node.layer_fixed_s": Quantity(
        "a per-layer fixed time", "s", "seconds", 0.0, 0.1, (US, MS), _LATENCY
    ),
    "node.ep_latency_s": Quantity(
        "an expert-parallel latency", "s", "seconds", 0.0, 0.1, (US, MS), _LATENCY
    ),
    "node.tp_allreduce_latency_s": Quantity(
        "a tensor-parallel all-reduce latency", "s", "seconds", 0.0, 0.1, (US, MS), _LATENCY
    ),
    # --- GPU ---
    "gpu.hbm_gbyte": Quantity(
        "a GPU's HBM", "GB", "GB", 1.0, 10_000.0, (BYTES_AS_GB,), "288 GB on a B300"
    ),
    "gpu.hbm_tbyte_s": Quantity(
        "a GPU's HBM bandwidth",
        "TB/s",
        "TB/s",
        0.01,
        100.0,
        (GB_S_AS_TB_S, B_S_AS_TB_S),
        "8 TB/s on a B300",
    ),
    "gpu.nvlink_bidir_gbyte_s": Quantity(
        "a GPU's NVLink bandwidth",
        "GB/s",
        "GB/s",
        0.0,
        100_000.0,
        (BYTES_AS_GB,),
        "1,800 GB/s on NVLink 5",
    ),
    "gpu.bf16_dense_tflops": Quantity(
        "a GPU's dense BF16 rate",
        "TFLOPS",
        "TFLOPS",
        1.0,
        1e5,
        (FLOPS_AS_TFLOPS,),
        "2,250 on a B200",
    ),
    "gpu.fp8_dense_tflops": Quantity(
        "a GPU's dense FP8 rate",
        "TFLOPS",
        "TFLOPS",
        1.0,
        1e5,
        (FLOPS_AS_TFLOPS,),
        "4,500 on a B200",
    ),
    "gpu.fp4_dense_tflops": Quantity(
        "a GPU's dense FP4 rate",
        "TFLOPS",
        "TFLOPS",
        1.0,
        1e5,
        (FLOPS_AS_TFLOPS,),
        "15,000 on a B300",
    ),
    "gpu.tdp_w": Quantity(
        "a GPU's power", "W", "watts", 10.0, 10_000.0, (KW_AS_W, MW_AS_W), "1,400 W on a B300"
    ),
    "gpu.release_year": Quantity("a GPU's release year", "", "years", 1990, 2100),
    # --- storage ---
    "storage.aggregate_read_gbyte_s": Quantity(
        "a store's read bandwidth",
        "GB/s",
        "GB/s",
        0.01,
        1e6,
        (BYTES_AS_GB, MB_AS_GB),
        "6.6 TB/s for 180 3FS nodes; 1 PB/s leaves room",
    ),
    "storage.aggregate_write_gbyte_s": Quantity(
        "a store's write bandwidth",
        "GB/s",
        "GB/s",
        0.01,
        1e6,
        (BYTES_AS_GB, MB_AS_GB),
        "as its read bandwidth",
    ),
    "storage.max_client_read_gbyte_s": Quantity(
        "a client's read bandwidth",
        "GB/s",
        "GB/s",
        0.01,
        1e5,
        (BYTES_AS_GB, MB_AS_GB),
        "40 GB/s per 3FS client",
    ),
    "storage.storage_nodes": Quantity("a store's nodes", "nodes", "nodes", 1, 1_000_000),
    # --- workload and traces ---
    "turn_tokens": Quantity(
        "a turn's token count",
        "tokens",
        "tokens",
        0.0,
        1e8,
        (),
        "the longest context window of any model is 10M tokens (Llama 4 Scout)",
    ),
    "workload.append_tokens": Quantity(
        "a turn's appended tokens", "tokens", "tokens", 0.0, 1e8, (), "as a turn's tokens"
    ),
    "workload.generated_tokens": Quantity(
        "a turn's generated tokens", "tokens", "tokens", 0.0, 1e8, (), "as a turn's tokens"
    ),
    "workload.context_tokens": Quantity(
        "a turn's cached context", "tokens", "tokens", 0.0, 1e8, (), "as a turn's tokens"
    ),
    "workload.max_len_tokens": Quantity(
        "a trajectory's longest context", "tokens", "tokens", 1.0, 1e8, (), "as a turn's tokens"
    ),
    "workload.tool_latency_s": Quantity(
        "a tool call's latency", "s", "seconds", 0.0, 86_400.0, (MS,), "a day at most"
    ),
    "workload.turns": Quantity("an agent's turns", "turns", "turns", 1.0, 1e6),
    "workload.kv_bytes_per_token": Quantity(
        "a model's KV bytes per token",
        "B",
        "bytes",
        1.0,
        1e8,
        (),
        "about 70 KB for DeepSeek-V3 in FP8; 1.3 MB for a 405B dense model in BF16",
    ),
    # --- model ---
    "model.context_window_tokens": Quantity(
        "a context window", "tokens", "tokens", 1.0, 1e9, (), "10M tokens at most today"
    ),
    "model.num_layers": Quantity("a model's layers", "layers", "layers", 1, 10_000),
    "model.hidden_size": Quantity("a model's hidden size", "", "elements", 1, 1_000_000),
    # issue 34, part 2: shares typed as percent, measured and published metrics (calibrate's
    # CSV, validation cases' paper values), tolerances and standard errors.
    "workload.turns_spread": Quantity(
        "a spread of turns", "", "a share of 1", 0.0, 1.0, (PERCENT,), "0 <= s <= 1 of the mean"
    ),
    "node.cnic_collective_share": Quantity(
        "the compute NICs' collective share",
        "",
        "a share of 1",
        0.0,
        1.0,
        (PERCENT,),
        "a share of each CNIC direction",
    ),
    # A model metric as measured (calibrate) or published (a validation case's paper value),
    # keyed "metric." + the metric's own name (its last dotted part: "basic.jct_s" is jct_s).
    "metric.jct_s": Quantity(
        "a job completion time",
        "s",
        "seconds",
        1e-3,
        1e6,
        (MS,),
        "the paper's offline runs take 1,000 to 20,000 s (Figure 7); 11 days leaves room",
    ),
    "metric.ttft_s": Quantity(
        "a saturated run's TTFT",
        "s",
        "seconds",
        1e-3,
        3600.0,
        (MS,),
        "about a minute of queueing in the paper's saturated runs; an hour leaves room",
    ),
    "metric.online_ttft_s": Quantity(
        "an online TTFT", "s", "seconds", 1e-3, 600.0, (MS,), "as a TTFT SLO"
    ),
    **{
        f"metric.{name}": Quantity(
            what,
            "s",
            "seconds",
            1e-4,
            10.0,
            (MS, US),
            "30 to 50 ms in the paper (section 7.3); 0.1 ms is 10,000 tokens/s per stream",
        )
        for name, what in (("tpot_s", "a TPOT"), ("online_tpot_s", "an online TPOT"))
    },
    "metric.aps": Quantity(
        "an agents-per-second rate", "agents/s", "agents/s", 1e-6, 1e6, (), "0.1 to 10 in the paper"
    ),
    **{
        f"metric.{name}": Quantity(
            what, "turns/s", "turns/s", 1e-6, 1e7, (), "tens to thousands in the paper"
        )
        for name, what in (
            ("throughput_turns_per_s", "a throughput"),
            ("saturated_turns_per_s", "a saturated throughput"),
        )
    },
    "measured.rel_stderr": Quantity(
        "a relative standard error",
        "",
        "a share of 1",
        1e-6,
        1.0,
        (PERCENT,),
        "0.05 for a value known to 5%; past 1 (100%) it weighs nothing",
    ),
    "validation.tolerance": Quantity(
        "a validation case's relative tolerance",
        "",
        "a share of 1",
        0.0,
        1.0,
        (PERCENT,),
        "0.1 to 0.15 in the shipped cases; past 1 (100%) a case checks little",
    ),
    "baseline.rel_tol": Quantity(
        "a baseline's relative tolerance",
        "",
        "a share of 1",
        0.0,
        1.0,
        (PERCENT,),
        "1e-6 by default; past 1 (100%) a gate checks little",
    ),
    # end of issue 34, part 2
    # --- AIConfigurator system files (aic import-system), in their own units ---
    "aic.gpu.mem_bw": Quantity(
        "a GPU's HBM bandwidth",
        "B/s",
        "B/s",
        1e10,
        1e14,
        (Slip("GB/s", 1e9), Slip("TB/s", 1e12)),
        "8 TB/s on a B300; tens of GB/s on the smallest accelerators",
    ),
    "aic.gpu.mem_capacity": Quantity(
        "a GPU's HBM", "B", "bytes", 1e9, 1e13, (Slip("GB", 1e9),), "288 GB on a B300"
    ),
    **{
        f"aic.gpu.{dtype}_tc_flops": Quantity(
            f"a GPU's {name} tensor rate",
            "FLOP/s",
            "FLOP/s",
            1e12,
            1e17,
            (Slip("TFLOPS", 1e12),),
            "15 PFLOPS of FP4 on a B300",
        )
        for dtype, name in (("bfloat16", "BF16"), ("fp8", "FP8"), ("fp4", "FP4"))
    },
    "aic.gpu.power": Quantity(
        "a GPU's power", "W", "watts", 10.0, 1e4, (KW_AS_W, MW_AS_W), "1,400 W on a B300"
    ),
    **{
        f"aic.node.{key}": Quantity(
            what,
            "B/s",
            "B/s",
            low,
            1e13,
            (Slip("GB/s", 1e9),),
            "1.8 TB/s of NVLink 5 at most; a NIC's tens of GB/s",
        )
        for key, what, low in (
            ("intra_node_bw", "a GPU's bandwidth inside a node", 1e9),
            ("inter_node_bw", "a GPU's bandwidth between nodes", 1e8),
            ("inter_rack_bw", "a GPU's bandwidth between racks", 1e8),
        )
    },
    # issue 32, cost: prices and power of nodes and storage nodes, and the site's options.
    # A price per hour typed per month or per GPU, a capital price in thousands, kilowatts
    # typed for watts, a PUE or an electricity price typed as a percent or in cents.
    "node.price_usd_per_hour": Quantity(
        "a node's price per hour",
        "$/h",
        "US dollars an hour",
        0.01,
        10_000.0,
        (Slip("$/month", 1 / 730.5),),
        "8-GPU cloud instances list at about $30 to $110 an hour on demand (hardware_profiles/"
        "node/*.toml); 10,000 $/h is a hundred of them",
    ),
    "node.capital_usd": Quantity(
        "a node's capital price",
        "$",
        "US dollars",
        1_000.0,
        100_000_000.0,
        (Slip("thousands of $", 1e3),),
        "an 8-GPU DGX lists at about $200,000 to $500,000 (hardware_profiles/node/*.toml)",
    ),
    "node.amortization_years": Quantity(
        "an amortization period",
        "years",
        "years",
        0.25,
        30.0,
        (Slip("months", 1 / 12),),
        "servers are written off over 3 to 6 years",
    ),
    "node.power_w": Quantity(
        "a node's power",
        "W",
        "watts",
        100.0,
        1_000_000.0,
        (Slip("kW", 1e3),),
        "a DGX H100 draws 10.2 kW at most, a DGX B200 14.3 kW (hardware_profiles/node/*.toml)",
    ),
    "storage.price_usd_per_hour": Quantity(
        "a storage node's price per hour",
        "$/h",
        "US dollars an hour",
        0.001,
        10_000.0,
        (Slip("$/month", 1 / 730.5),),
        "as a node's",
    ),
    "storage.capital_usd": Quantity(
        "a storage node's capital price",
        "$",
        "US dollars",
        100.0,
        100_000_000.0,
        (Slip("thousands of $", 1e3),),
        "a 16-SSD storage server is tens of thousands of dollars",
    ),
    "storage.amortization_years": Quantity(
        "an amortization period",
        "years",
        "years",
        0.25,
        30.0,
        (Slip("months", 1 / 12),),
        "servers are written off over 3 to 6 years",
    ),
    "storage.power_w": Quantity(
        "a storage node's power",
        "W",
        "watts",
        10.0,
        1_000_000.0,
        (Slip("kW", 1e3),),
        "a storage server draws hundreds of watts to a few kW",
    ),
    "pue": Quantity(
        "a site's power usage effectiveness",
        "",
        "a ratio of facility to IT power",
        1.0,
        3.0,
        (Slip("percent", 1e-2),),
        "1.0 is no overhead (the default); hyperscale sites report about 1.1, the industry "
        "average is about 1.5 to 1.6 (Uptime Institute surveys)",
    ),
    "power_price": Quantity(
        "an electricity price",
        "$/kWh",
        "US dollars a kilowatt-hour",
        0.001,
        5.0,
        (Slip("cents/kWh", 1e-2), Slip("$/MWh", 1e-3)),
        "industrial electricity is about $0.05 to $0.20 a kWh",
    ),
    # end of issue 32, cost
    # issue 35: flags of runs and a trace's clock, each a unit slip found in a trial
    # (simulate --duration 3600000: milliseconds typed for an hour; --window 1e308 printed
    # "2.78e+304 h windows"; size --target-aps 1e308 searched; --aps 5e-324 printed APS 0).
    "simulate.duration_s": Quantity(
        "a simulated span of arrivals",
        "s",
        "seconds",
        1e-3,
        604_800.0,
        (MS,),
        "a week of arrivals; the default is four lifetimes of the longest agent at light load",
    ),
    "simulate.warmup_s": Quantity(
        "a simulated warm-up", "s", "seconds", 0.0, 604_800.0, (MS,), "as the span of arrivals"
    ),
    "simulate.window_s": Quantity(
        "a time series' window",
        "s",
        "seconds",
        1e-3,
        604_800.0,
        (MS,),
        "as the span of arrivals: a longer window is one window",
    ),
    "aps": Quantity(
        "an arrival rate of agents",
        "agents/s",
        "agents/s",
        1e-6,
        1e6,
        (Slip("agents/hour", 1 / 3600),),
        "2P4D H800 nodes serve 0.16 to 0.31 agents/s of paper-64k (size's default); 10^6 is "
        "millions of such nodes, 10^-6 one agent in 11 days (printed as 0 below)",
    ),
    "mooncake.request_gap_ms": Quantity(
        "the gap between a Mooncake trace's requests",
        "ms",
        "milliseconds",
        1.0,
        60_000.0,
        (Slip("seconds", 1e3), Slip("microseconds", 1e-3)),
        "175 ms in the FAST'25 synthetic trace (measured); other public traces' mean gaps, "
        "from their published sizes and spans (not checked here), about 0.2 s (Azure LLM "
        "inference 2023, code) to 7 s (BurstGPT): under 1 ms is over 1,000 requests/s, over "
        "a minute an idle service",
    ),
}


def metric_key(metric: str) -> str | None:
    """The table's key of a model metric ("basic.jct_s": ``metric.jct_s``), or None where
    the table holds none (a ratio, a speedup: no unit to slip)."""
    key = f"metric.{metric.rpartition('.')[2]}"
    return key if key in QUANTITIES else None


def explained(key: str, value: object) -> str | None:
    """:func:`problem`'s message only where a unit slip explains the value (a value it cannot
    explain, such as -1, keeps the schema's own message about its bounds)."""
    why = problem(key, value)
    return why if why is not None and "did you mean" in why else None


def problem(key: str, value: object) -> str | None:
    """Why ``value`` is implausible as the quantity ``key`` (see :data:`QUANTITIES`), or None
    (also for a key the table does not hold, and for what is not a number: the schema's own
    type check says so)."""
    quantity = QUANTITIES.get(key)
    if quantity is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float: the readers' finiteness check says so
        return None
    return quantity.problem(number)
