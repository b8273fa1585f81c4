"""Pydantic schemas of the six profile kinds: gpu, node, storage, model, workload, engine.

Conventions (issue 2):
- the unit is part of every field name: ``_gbit_s`` (1e9 bit/s), ``_gbyte_s`` (1e9 B/s),
  ``_tbyte_s`` (1e12 B/s), ``_gbyte`` (1e9 B), ``_tbyte`` (1e12 B), ``_tflops`` (1e12 FLOP/s,
  dense), ``_w`` (watts),
  ``_tokens``; counts (layers, heads, dims) and dimensionless factors (``_efficiency``,
  ``_share``) have no unit;
- unknown keys are rejected (``extra="forbid"``);
- numbers are finite and, where a physical quantity, positive;
- every number a profile sets cites a source in ``[sources]`` or explains itself in
  ``[unconfirmed]`` (checked for the shipped library by ``tests/test_profiles.py``).

Derived quantities (PCIe GB/s from the generation, KV bytes and FLOPs per token from the model
architecture) are computed by code, never typed in.
"""

# Without ``from __future__ import annotations``: pydantic reads each field's annotation as the
# object it is, where a string it would compile and evaluate first (about 150 fields, some 2 ms
# of a cold start). A method's own class in its annotation is quoted.
import functools
import math
import re
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dualpath_plan import plausible

# --- field types ---------------------------------------------------------------------------

# No physical quantity here exceeds 1e12 in its own unit (tokens, GB/s, TFLOPS, dims, ...);
# the bound keeps every product the model forms far from floating-point overflow.
MAX_MAGNITUDE = 1e12
# ... nor is a positive quantity below 1e-9 of its unit, or an efficiency below 1e-6 of the
# datasheet rate: such values only drive results to 0 or overflow.
MIN_MAGNITUDE = 1e-9
# Numbers are strict: a float field takes an int or a float, an int field an int; never a bool
# (``snic_count = true`` is not 1) nor a number in a string (``"200"``). Booleans likewise take
# true or false only (StrictBool), not 1 or "yes".
Positive = Annotated[
    float, Strict(), Field(ge=MIN_MAGNITUDE, le=MAX_MAGNITUDE, allow_inf_nan=False)
]
NonNegative = Annotated[float, Strict(), Field(ge=0, le=MAX_MAGNITUDE, allow_inf_nan=False)]
PositiveInt = Annotated[int, Strict(), Field(gt=0, le=MAX_MAGNITUDE)]
NonNegativeInt = Annotated[int, Strict(), Field(ge=0, le=MAX_MAGNITUDE)]
# An efficiency is the achieved share of a datasheet rate: 0 < e <= 1.
Efficiency = Annotated[float, Strict(), Field(ge=1e-6, le=1, allow_inf_nan=False)]
# A share of a capacity reserved for something else: 0 <= s < 1.
Share = Annotated[float, Strict(), Field(ge=0, lt=1, allow_inf_nan=False)]
# A Hugging Face repository id, "org/name".
HfName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$", max_length=200)]
# An AIConfigurator system name: its systems/<name>.yaml file's stem (h200_sxm, gb200).
AicSystemName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][\w.-]*$", max_length=100)]
# A spread around a mean, as a share of it: 0 <= s <= 1.
Spread = Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)]

# A profile id: the file name without .toml.
ID_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"


def profile_id_error(given: str) -> str | None:
    """Why ``given`` is not a profile id, or None."""
    if re.match(ID_PATTERN, given) and len(given) <= 100:
        return None
    return (
        f"{given!r} is not a profile id; expected lower-case letters, digits, '.', '_' and "
        "'-', starting with a letter or digit, at most 100 characters"
    )


Kind = Literal["gpu", "node", "storage", "model", "workload", "engine"]
KINDS: tuple[Kind, ...] = ("gpu", "node", "storage", "model", "workload", "engine")
Dtype = Literal["bf16", "fp8", "fp4"]
KvDtype = Literal["bf16", "fp16", "fp8", "fp8_flashmla"]


class ProfileBase(BaseModel):
    """Fields every profile has. ``id`` is the file name without ``.toml``."""

    # defer_build (every profile kind inherits it): a schema's validator is built when a
    # profile of its kind is first validated, not when the class is defined. A command builds
    # only the kinds it reads (a plain `size` no engine, nor this base), about 2 ms each.
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_assignment=True, defer_build=True
    )

    kind: Kind
    id: str = Field(pattern=ID_PATTERN)
    name: str
    description: str = ""
    # Field name -> list of sources (URL or paper section); "*" for the profile as a whole.
    sources: dict[str, list[str]] = Field(default_factory=dict)
    # Field name -> why the value could not be confirmed from an authoritative source.
    unconfirmed: dict[str, str] = Field(default_factory=dict)
    # Field name -> standard error of a fitted value (written by ``calibrate``, in the field's
    # unit); outcomes propagate it to intervals (docs/model.md section 8).
    calibration_stderr: dict[str, NonNegative] = Field(default_factory=dict)

    KIND: ClassVar[str] = ""

    @field_validator("*")
    @classmethod
    def _plausible(cls, value: Any, info: ValidationInfo) -> Any:
        """A number outside what the quantity is in any deployment is a unit slip
        (``dualpath_plan/plausible.py``: one table for flags, --set, files and imports)."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            why = plausible.problem(f"{cls.KIND}.{info.field_name}", value)
            if why is not None:
                raise ValueError(why)
        return value

    @model_validator(mode="after")
    def _sources_name_fields(self) -> "ProfileBase":
        known = set(type(self).model_fields) | {"*"}
        for table in ("sources", "unconfirmed"):
            for key in getattr(self, table):
                if key not in known:
                    raise ValueError(
                        f"[{table}] names '{key}', which is not a field of a {self.kind}"
                    )
        for key in self.calibration_stderr:
            value = getattr(self, key, None)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(
                    f"[calibration_stderr] names '{key}', which is not a numeric field of a "
                    f"{self.kind}"
                )
        return self

    def numeric_fields_set(self) -> list[str]:
        """Names of numeric fields this profile sets explicitly (each needs a source)."""
        out = []
        for name in self.model_fields_set:
            value = getattr(self, name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out.append(name)
        return sorted(out)


# --- GPU -----------------------------------------------------------------------------------

# PCIe transfer rate per lane (GT/s) and the usable share after line encoding, per generation.
# Gen3-5: 128b/130b; Gen6: 256-byte FLIT carrying 242 B of TLP+DLP (hardware-and-models.md A.3).
PCIE_GT_S: dict[int, float] = {3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING: dict[int, float] = {3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


class GpuProfile(ProfileBase):
    KIND: ClassVar[str] = "gpu"
    kind: Literal["gpu"] = "gpu"
    architecture: Literal["ampere", "ada", "hopper", "blackwell"]
    release_year: PositiveInt
    bf16_dense_tflops: Positive
    fp8_dense_tflops: Positive | None = None  # None: no FP8 tensor cores (Ampere)
    fp4_dense_tflops: Positive | None = None  # None: no FP4 tensor cores (before Blackwell)
    hbm_gbyte: Positive
    hbm_tbyte_s: Positive
    pcie_gen: Literal[3, 4, 5, 6]
    pcie_lanes: PositiveInt = 16
    nvlink_bidir_gbyte_s: NonNegative  # NVIDIA's headline: both directions, all links
    tdp_w: Positive
    # The AIConfigurator systems (systems/<name>.yaml) that are this GPU: ``aic check`` warns
    # when a result was planned for another. Each cites the file in [sources].
    aic_systems: tuple[AicSystemName, ...] = ()

    @property
    def pcie_raw_gbyte_s(self) -> float:
        """Raw PCIe line rate per direction, GB/s (Gen5 x16 = 64)."""
        return PCIE_GT_S[self.pcie_gen] * self.pcie_lanes / 8.0

    @property
    def pcie_usable_gbyte_s(self) -> float:
        """PCIe rate per direction after line encoding, GB/s (Gen5 x16 = 63.02)."""
        return self.pcie_raw_gbyte_s * PCIE_ENCODING[self.pcie_gen]

    def dense_tflops(self, dtype: Dtype | Literal["best"]) -> float | None:
        """Dense tensor TFLOPS for a dtype; ``best`` is the lowest precision the GPU has."""
        if dtype == "best":
            for candidate in ("fp4", "fp8", "bf16"):
                value = self.dense_tflops(candidate)  # type: ignore[arg-type]
                if value is not None:
                    return value
            return None
        return {
            "bf16": self.bf16_dense_tflops,
            "fp8": self.fp8_dense_tflops,
            "fp4": self.fp4_dense_tflops,
        }[dtype]

    def best_dtype(self) -> Dtype:
        for candidate in ("fp4", "fp8"):
            if self.dense_tflops(candidate) is not None:  # type: ignore[arg-type]
                return candidate  # type: ignore[return-value]
        return "bf16"


# --- node ----------------------------------------------------------------------------------


# "fitted, partial": written by calibrate --allow-partial, some fitted fields not pinned down by
# the points (each listed in [unconfirmed] with why).
EfficiencySource = Literal["measured", "fitted, partial", "transferred", "datasheet"]
# How calibrate --allow-partial lists a field its points did not pin down in [unconfirmed]
# (the measurements' file name, and why).
PARTIAL_FIT_NOTE = "fitted by calibrate {} but {}"


def partial_fit_fields(profile: ProfileBase) -> tuple[str, ...]:
    """The fields a partial fit left not pinned down (listed so in ``[unconfirmed]``)."""
    head = PARTIAL_FIT_NOTE.split("{}")[0]
    return tuple(f for f, why in profile.unconfirmed.items() if why.startswith(head))


# How the registry cites a calibration field it transferred from another node (its origin's
# id), ahead of the origin's own source.
TRANSFERRED_FROM = "transferred from node '{}': "


class NodeProfile(ProfileBase):
    """A server: its GPUs, compute NICs (east-west, one per GPU typically), storage NICs
    (south-north, shared by the node's engines) and host DRAM.

    Calibration fields (``CALIBRATION_FIELDS``: efficiencies that scale datasheet rates to
    achieved ones, HBM held back, and the latency floors of a layer) say where they come from
    in ``efficiency_source`` (docs/model.md section 6):
    - ``datasheet``: none is set; every rate is the datasheet's and every floor 0 (speed of
      light);
    - ``measured``: the profile sets them itself, each citing its measurement or fit;
    - ``fitted, partial``: as measured, but a fit left some of them not pinned down by its
      points (``calibrate --allow-partial``; each listed in ``[unconfirmed]`` with why);
    - ``transferred``: taken from the node ``efficiencies_from`` (a measured one) wherever this
      profile does not set them; the registry applies the transfer.
    ``cnic_collective_share`` is the share of CNIC bandwidth that model collectives keep
    (InfiniBand VL arbitration reserves about 99% for them under contention, dualpath-paper.md
    2.6); KV traffic gets the rest.
    """

    KIND: ClassVar[str] = "node"
    # The fields a calibration sets (and --speed-of-light resets): the achieved shares of
    # datasheet rates, the HBM a non-layer-wise batch cannot use, and the latency floors.
    CALIBRATION_FIELDS: ClassVar[tuple[str, ...]] = (
        "snic_efficiency",
        "cnic_efficiency",
        "pcie_efficiency",
        "dram_efficiency",
        "prefill_mfu",
        "decode_hbm_efficiency",
        "prefill_hbm_reserve_gbyte",
        "layer_fixed_s",
        "ep_latency_s",
        "ep_link_efficiency",
        "tp_allreduce_latency_s",
    )
    kind: Literal["node"] = "node"
    gpu: str
    gpus_per_node: PositiveInt
    cnic_count: PositiveInt
    cnic_gbit_s: Positive
    cnic_pcie_gen: Literal[3, 4, 5, 6] = 5
    cnic_pcie_lanes: PositiveInt = 16
    snic_count: PositiveInt
    snic_gbit_s: Positive
    # Host DRAM capacity: descriptive, not a limit the model applies (the paper's read paths
    # stage a request's KV, about 1.3 GB, in DRAM of hundreds of GB to TBs; its bandwidth,
    # dram_gbyte_s, is the DRAM link's capacity). Results do not change with it.
    dram_gbyte: Positive
    dram_gbyte_s: Positive
    efficiency_source: EfficiencySource = "datasheet"
    efficiencies_from: str | None = None  # the measured node a transfer takes them from
    # The engine profile (a serving framework's measured per-operator efficiency curves on
    # this node's GPU) that times its prefill passes and decode steps operator by operator
    # (physics/operators.py, docs/model.md section 6b). None: the one-MFU roofline with this
    # node's own prefill_mfu, decode_hbm_efficiency and latency floors (the testbed's fit).
    engine: str | None = Field(default=None, pattern=ID_PATTERN)
    # Achieved share of the SNIC line rate for storage reads.
    snic_efficiency: Efficiency = 1.0
    # Achieved share of the CNIC line rate for KV transfers (RDMA, loopback copies).
    cnic_efficiency: Efficiency = 1.0
    # Achieved share of the PCIe link rate (after encoding) for DMA (TLP headers etc.).
    pcie_efficiency: Efficiency = 1.0
    # Achieved share of the DRAM peak (STREAM-like sustained vs theoretical).
    dram_efficiency: Efficiency = 1.0
    # Model FLOPs utilisation of prefill at a saturating batch (dense tensor peak).
    prefill_mfu: Efficiency = 1.0
    # Achieved share of HBM bandwidth in decode steps.
    decode_hbm_efficiency: Efficiency = 1.0
    # Share of each CNIC direction kept by model collectives; KV traffic gets the residual.
    cnic_collective_share: Share = 0.0
    # Prefill batching: a forward pass of b requests takes t1 (h + b); h is the batch at which
    # throughput reaches half its plateau. 40/17 = 2.35 gives the paper's Figure 3 right
    # (3x from batch 1 to 20 at 30K context, 300 appended tokens).
    prefill_batch_half_requests: NonNegative = 40.0 / 17.0
    # HBM per GPU held back from a non-layer-wise forward batch's KV (activations,
    # communication buffers, allocator slack); layer-wise prefill holds one layer's KV only.
    prefill_hbm_reserve_gbyte: NonNegative = 0.0
    # Latency floors (docs/model.md section 6), paid per decode step and per prefill pass:
    # fixed time of one transformer layer's kernels beyond the roofline (launches,
    # latency-bound small kernels, synchronisation) ...
    layer_fixed_s: NonNegative = 0.0
    # ... expert-parallel dispatch + combine per MoE layer: this fixed latency plus the
    # routed tokens' bytes over the CNICs (to other nodes) or NVLink (within the node) at
    # ep_link_efficiency of their rates ...
    ep_latency_s: NonNegative = 0.0
    ep_link_efficiency: Efficiency = 1.0
    # ... and, for dense models (tensor parallel within a node), two all-reduces per layer,
    # each this latency plus its bytes over NVLink.
    tp_allreduce_latency_s: NonNegative = 0.0
    # What one node costs (issue 32; docs/model.md section 13), one of: a price per hour
    # (rented: power and facility included), or a capital price with the years it is paid
    # off over (owned: its power is priced apart, --power-price and --pue). power_w: the
    # node's maximum draw. None: not known (a plan on it says its cost is unknown).
    price_usd_per_hour: Positive | None = None
    capital_usd: Positive | None = None
    amortization_years: Positive | None = None
    power_w: Positive | None = None

    def calibrated_by(self, field: str) -> str:
        """Whose calibration ``field`` holds: the measured node it was transferred from (the
        registry cites each transferred field with TRANSFERRED_FROM), or this node's own."""
        if self.efficiencies_from is not None:
            mark = TRANSFERRED_FROM.format(self.efficiencies_from)
            if any(src.startswith(mark) for src in self.sources.get(field, [])):
                return self.efficiencies_from
        return self.id

    @model_validator(mode="after")
    def _efficiency_source(self) -> "NodeProfile":
        # Whether the values match the source is checked for the shipped library by
        # tests/test_profiles.py; here only the pair is (--set may override any value).
        if self.efficiency_source == "transferred":
            if not self.efficiencies_from:
                raise ValueError(
                    "efficiency_source 'transferred' needs efficiencies_from (a measured node)"
                )
        elif self.efficiencies_from is not None:
            raise ValueError(
                f"efficiencies_from is only for efficiency_source 'transferred', "
                f"not '{self.efficiency_source}'"
            )
        for key in self.calibration_stderr:
            if key not in self.CALIBRATION_FIELDS:
                raise ValueError(
                    f"[calibration_stderr] names '{key}', which is not a calibration field "
                    f"({', '.join(self.CALIBRATION_FIELDS)})"
                )
        if self.efficiency_source == "datasheet" and self.calibration_stderr:
            raise ValueError(
                "efficiency_source 'datasheet' (speed of light) has no calibration to carry "
                "[calibration_stderr]; say 'measured' or 'transferred'"
            )
        if self.efficiency_source in ("measured", "fitted, partial") and not any(
            getattr(self, f) != type(self).model_fields[f].default for f in self.CALIBRATION_FIELDS
        ):
            raise ValueError(
                f"efficiency_source '{self.efficiency_source}' but every calibration field is at "
                "its datasheet "
                f"default ({', '.join(self.CALIBRATION_FIELDS)}); set the measured values or "
                "say 'datasheet'"
            )
        return self

    @model_validator(mode="after")
    def _one_price(self) -> "NodeProfile":
        price_problem(self)
        return self

    @model_validator(mode="after")
    def _nics_per_gpu(self) -> "NodeProfile":
        if self.cnic_count > self.gpus_per_node * 4:
            raise ValueError("cnic_count is more than 4 per GPU; expected about one per GPU")
        return self

    @property
    def cnic_pcie_usable_gbyte_s(self) -> float:
        return (
            PCIE_GT_S[self.cnic_pcie_gen]
            * self.cnic_pcie_lanes
            / 8.0
            * PCIE_ENCODING[self.cnic_pcie_gen]
        )


# --- storage -------------------------------------------------------------------------------


class StorageProfile(ProfileBase):
    KIND: ClassVar[str] = "storage"
    kind: Literal["storage"] = "storage"
    storage_nodes: PositiveInt
    aggregate_read_gbyte_s: Positive
    aggregate_write_gbyte_s: Positive
    # Most one client node can read (beyond that the client's own NIC is the limit).
    max_client_read_gbyte_s: Positive
    # A store of finite size (issue 32; docs/model.md section 12): one storage node's KV
    # capacity and read/write bandwidth, so that --storage-nodes N gives N of them and
    # size --target-aps the count a target needs. None: not known (the store is not sized).
    node_capacity_tbyte: Positive | None = None
    node_read_gbyte_s: Positive | None = None
    node_write_gbyte_s: Positive | None = None
    # What one storage node costs (issue 32; docs/model.md section 13), one of: a price per hour
    # (rented: power and facility included), or a capital price with the years it is paid
    # off over (owned: its power is priced apart, --power-price and --pue). power_w: the
    # node's maximum draw. None: not known (a plan on it says its cost is unknown).
    price_usd_per_hour: Positive | None = None
    capital_usd: Positive | None = None
    amortization_years: Positive | None = None
    power_w: Positive | None = None

    @model_validator(mode="after")
    def _one_price(self) -> "StorageProfile":
        price_problem(self)
        return self


# Hours in a year of amortization: 365.25 days of 24 hours (a Julian year).
HOURS_PER_YEAR = 8766.0


def price_problem(p: NodeProfile | StorageProfile) -> None:
    """A node's price is one of a price per hour or a capital price over years (issue 32)."""
    if p.price_usd_per_hour is not None and p.capital_usd is not None:
        raise ValueError(
            "give price_usd_per_hour (rented) or capital_usd with amortization_years (owned), "
            "not both"
        )
    if (p.capital_usd is None) != (p.amortization_years is None):
        raise ValueError("capital_usd and amortization_years go together")


def hourly_price(p: NodeProfile | StorageProfile) -> float | None:
    """One node's price per hour: the rent, or the capital over its years (HOURS_PER_YEAR an
    hour, no interest); None where the profile gives no price. Power is not in it (see
    outcomes/cost.py: a rent includes it, owned hardware pays it apart)."""
    if p.price_usd_per_hour is not None:
        return p.price_usd_per_hour
    if p.capital_usd is not None and p.amortization_years is not None:
        return p.capital_usd / (p.amortization_years * HOURS_PER_YEAR)
    return None


# --- model ---------------------------------------------------------------------------------


class ModelProfile(ProfileBase):
    """A transformer's architecture numbers, as in its public config.

    Attention ``gqa`` covers MHA (kv heads = heads), GQA and MQA; ``mla`` is DeepSeek's
    multi-head latent attention, whose cache is one latent of ``kv_lora_rank`` plus a RoPE key
    of ``qk_rope_head_dim`` per token per layer. ``dsa_*`` describe DeepSeek Sparse Attention
    (V3.2): a lightning indexer scores all keys, main attention reads ``dsa_topk_tokens``.
    """

    KIND: ClassVar[str] = "model"
    kind: Literal["model"] = "model"
    num_layers: PositiveInt
    hidden_size: PositiveInt
    vocab_size: PositiveInt
    tie_word_embeddings: StrictBool = False
    attention: Literal["gqa", "mla"]
    num_attention_heads: PositiveInt
    # GQA
    num_kv_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    # MLA
    q_lora_rank: NonNegativeInt = 0  # 0: queries projected directly (no low-rank q)
    kv_lora_rank: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None
    # DSA (DeepSeek Sparse Attention)
    dsa_index_heads: PositiveInt | None = None
    dsa_index_head_dim: PositiveInt | None = None
    dsa_topk_tokens: PositiveInt | None = None
    # Whether the DSA indexer key cache is persisted to and loaded from storage. The paper's
    # 22 GB/PFLOP is reproduced without it (dualpath-paper.md 2.1), hence false by default.
    indexer_cache_loaded: StrictBool = False
    # Sliding-window attention layers (GPT-OSS alternates sliding and full layers).
    sliding_window_tokens: PositiveInt | None = None
    sliding_window_layers: NonNegativeInt = 0
    # FFN: the first ``num_dense_layers`` are dense, the rest MoE.
    num_dense_layers: NonNegativeInt
    intermediate_size: PositiveInt | None = None
    moe_intermediate_size: PositiveInt | None = None
    num_routed_experts: NonNegativeInt = 0
    num_shared_experts: NonNegativeInt = 0
    num_experts_per_token: NonNegativeInt = 0
    # Routing skew: per-expert token loads follow a power law of this exponent (larger: more
    # even); the most loaded expert-parallel rank sets a MoE layer's pace
    # (physics/operators.py, hottest_rank_load). None: balanced routing.
    expert_load_alpha: float | None = Field(default=None, gt=0.0, le=10.0)
    # Dtypes
    kv_cache_dtype: KvDtype
    weight_dtype: Dtype
    expert_weight_dtype: Dtype | None = None  # None: same as weight_dtype
    compute_dtype: Dtype  # tensor-core rate prefill runs at
    # Longest sequence (cached context + appended + generated tokens) the model serves: its
    # config's max_position_embeddings or the model card's context length. A workload or
    # trace turn beyond it is an input error; None (a user's profile): not checked.
    context_window_tokens: PositiveInt | None = None
    # The names this model is published under ("org/name" Hugging Face repositories, as
    # AIConfigurator's result files name a model): the repository whose config the profile
    # describes, its earlier names (meta-llama/Meta-Llama-3.1-70B) and republications of the
    # same architecture (quantised weights: FP8, NVFP4). ``aic check`` maps a row's model to
    # the profile that lists it (case-insensitive) and reads only its KV layout, so a
    # quantised variant's other weights do not matter there. Each cites its source.
    hf_names: tuple[HfName, ...] = ()
    # Published counts, only to cross-check the derived ones (tests compare them).
    published_total_params_billions: Positive | None = None
    published_active_params_billions: Positive | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "ModelProfile":
        if self.attention == "gqa":
            for name in ("num_kv_heads", "head_dim"):
                if getattr(self, name) is None:
                    raise ValueError(f"attention 'gqa' needs {name}")
            if self.num_kv_heads and self.num_attention_heads % self.num_kv_heads:
                raise ValueError("num_attention_heads must be a multiple of num_kv_heads")
            if self.kv_cache_dtype == "fp8_flashmla":
                raise ValueError("kv_cache_dtype 'fp8_flashmla' is an MLA layout; use fp8 for gqa")
        else:
            for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, name) is None:
                    raise ValueError(f"attention 'mla' needs {name}")
        dsa = (self.dsa_index_heads, self.dsa_index_head_dim, self.dsa_topk_tokens)
        if any(v is not None for v in dsa) and any(v is None for v in dsa):
            raise ValueError(
                "DSA needs all of dsa_index_heads, dsa_index_head_dim, dsa_topk_tokens"
            )
        if self.indexer_cache_loaded and self.dsa_index_heads is None:
            raise ValueError("indexer_cache_loaded needs a DSA indexer (dsa_* fields)")
        if self.sliding_window_layers > self.num_layers:
            raise ValueError("sliding_window_layers exceeds num_layers")
        if self.sliding_window_layers and self.sliding_window_tokens is None:
            raise ValueError("sliding_window_layers needs sliding_window_tokens")
        if self.num_dense_layers > self.num_layers:
            raise ValueError("num_dense_layers exceeds num_layers")
        if self.num_dense_layers and self.intermediate_size is None:
            raise ValueError("dense layers need intermediate_size")
        if self.num_dense_layers < self.num_layers:
            if not (
                self.moe_intermediate_size
                and self.num_routed_experts
                and self.num_experts_per_token
            ):
                raise ValueError(
                    "MoE layers need moe_intermediate_size, num_routed_experts "
                    "and num_experts_per_token"
                )
            if self.num_experts_per_token > self.num_routed_experts:
                raise ValueError("num_experts_per_token exceeds num_routed_experts")
        return self

    @property
    def has_dsa(self) -> bool:
        return self.dsa_topk_tokens is not None

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers


# --- workload ------------------------------------------------------------------------------


class WorkloadProfile(ProfileBase):
    """An agentic trajectory workload.

    Means per turn (the paper's Table 2 columns). ``context_tokens`` is the mean context (cached
    prefix) a turn re-reads; the paper warns that turns x (append + generated) != total, the
    averages being over different populations, so the model never assumes that identity.
    ``trace_file`` (CSV or JSON Lines, path relative to the profile) gives per-turn rows
    instead of means.
    """

    KIND: ClassVar[str] = "workload"
    # The fields a trace_file replaces with its rows (physics/workload.py, turn_mix): with one,
    # they describe the trace (workload import writes its means) and set nothing.
    TRACE_GIVEN: ClassVar[tuple[str, ...]] = (
        "turns",
        "append_tokens",
        "generated_tokens",
        "context_tokens",
        "turns_spread",
    )
    kind: Literal["workload"] = "workload"
    # A trajectory has at least one turn (the mean of counts >= 1).
    turns: Annotated[float, Strict(), Field(ge=1, le=MAX_MAGNITUDE, allow_inf_nan=False)]
    append_tokens: Positive
    generated_tokens: Positive
    context_tokens: NonNegative
    total_tokens: Positive | None = None
    max_len_tokens: PositiveInt | None = None
    trajectories: PositiveInt | None = None
    # Time an agent spends outside inference between turns (tool calls); the paper's replay
    # uses 0 (dualpath-paper.md 4.3).
    tool_latency_s: NonNegative = 0.0
    # Spread of turns per trajectory: counts uniform on [turns (1 - s), turns (1 + s)]. It sets
    # the straggler tail of an offline JCT (the longest trajectories finish alone, latency-bound);
    # 0: every trajectory has the mean. A trace file gives the observed counts instead.
    turns_spread: Spread = 0.0
    trace_file: str | None = None
    # Arrivals as a trace observed them (``workload import``): requests per second over the
    # trace's span, and the coefficient of variation of the gaps between requests (1: Poisson,
    # the default where a trace has no timestamps; > 1: bursty). The online model's queueing
    # waits scale with (cv^2 + c_s^2) / 2 (Kingman), c_s the service's own variation.
    arrival_rate_per_s: Positive | None = None
    arrival_cv: Annotated[float, Strict(), Field(ge=0, le=1e3, allow_inf_nan=False)] = 1.0
    # The abstract form, for planning before a model is chosen: a turn loads
    # context_tokens x kv_bytes_per_token of KV and needs (bytes / gb_per_pflop) prefill FLOPs.
    # Both or neither; with them, the model only sets decode cost and weights.
    gb_per_pflop: Positive | None = None
    kv_bytes_per_token: Positive | None = None

    @model_validator(mode="after")
    def _abstract_pair(self) -> "WorkloadProfile":
        if (self.gb_per_pflop is None) != (self.kv_bytes_per_token is None):
            raise ValueError("the abstract form needs both gb_per_pflop and kv_bytes_per_token")
        if self.gb_per_pflop is not None and self.trace_file:
            raise ValueError("give a trace_file or the abstract form (gb_per_pflop), not both")
        return self

    @field_validator("max_len_tokens")
    @classmethod
    def _longest_holds_the_mean(cls, v: int | None, info: ValidationInfo) -> int | None:
        # The longest request is at least the mean one (context 70,000 with a max_len of
        # 65,536 was taken). total_tokens is not held to this: a trajectory's mean total and a
        # turn's mean context average different populations (see above). A field check, so
        # that an error names the field.
        context, append = info.data.get("context_tokens"), info.data.get("append_tokens")
        if v is None or context is None or append is None:
            return v  # one of them is missing or bad: its own error says so
        if v < context + append:
            raise ValueError(
                "below the mean request, context_tokens + append_tokens = "
                f"{context + append:,.0f} (raise max_len_tokens with it)"
            )
        return v

    @property
    def is_abstract(self) -> bool:
        return self.gb_per_pflop is not None

    @property
    def hit_rate(self) -> float:
        """Cached share of a turn's prompt: context / (context + append)."""
        return self.context_tokens / (self.context_tokens + self.append_tokens)


# --- engine --------------------------------------------------------------------------------


# OperatorCurve.shapes: hidden, width, local experts, experts, k, f_c, f_m, launch_s.
SHAPE_COLUMNS = 8


@functools.lru_cache(maxsize=64)
def _shapes_of(
    shapes: tuple[tuple[float, ...], ...], hidden: float, experts: float, top_k: float
) -> np.ndarray:
    """The rows of one model's expert shape (its hidden size, experts and top-k), as a
    read-only array: a model reads a handful of a table's hundreds of rows."""
    rows = [r for r in shapes if r[0] == hidden and r[3] == experts and r[4] == top_k]
    out = np.array(rows, dtype=np.float64).reshape(-1, SHAPE_COLUMNS)
    out.setflags(write=False)
    return out


class OperatorCurve(BaseModel):
    """One operator family's achieved efficiency on one GPU under one framework, fitted to
    measured kernel timings (bench/fit_engine.py; docs/model.md section 6b):

        t = launch_s + max(F / (P e_c s), B / (W e_m)) [+ slot_traffic S / W],
        s = x / (x + half_size) [x tiles / (tiles + half_tiles)]

    F the operator's FLOPs, P the GPU's dense peak at its dtype, B its HBM bytes, W the HBM
    bandwidth; s the share of the GPU a shape keeps busy, rising with the operator's size x
    (tokens of a GEMM, keys per query token of prefill attention, context x batch of decode
    attention, tokens per expert of a grouped MoE GEMM). ``fit_*`` say how well the curve
    reproduces the kernels it was fitted to (descriptive; the model does not read them)."""

    # Built with the first engine profile validated (ProfileBase's defer_build).
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_assignment=True, defer_build=True
    )

    launch_s: NonNegative
    compute_efficiency: Efficiency
    memory_efficiency: Efficiency
    half_size: NonNegative = 0.0
    # GEMMs only: output tiles (128 x 128) at which half the GPU's SMs are busy.
    half_tiles: NonNegative = 0.0
    # Grouped MoE GEMMs only: how many times the layer's routed-slot rows (every token x top-k
    # slot: its hidden and expert-width activations in and out) the framework's MoE kernels
    # move through HBM at full bandwidth, serially beside the GEMMs: about 1-3 where the
    # intermediate caches are materialized for every slot, local or not (Triton's fused MoE),
    # less where they are fused (TensorRT-LLM's).
    slot_traffic: NonNegative = 0.0
    # Grouped MoE GEMMs only: the kernel's measured efficiency at the shapes it was measured
    # on, as factors on compute_efficiency and memory_efficiency. Triton's fused MoE runs a
    # tile configuration tuned per (experts, width, GPU) where the framework ships one and a
    # default elsewhere, so its efficiency jumps between shapes by up to 4x in either
    # direction, which no smooth curve follows, and its fixed cost (routing, alignment and
    # sorting kernels) grows with the experts and the hidden size. Rows (hidden, local width,
    # local experts, experts, top-k, compute factor, memory factor, launch_s), fitted per
    # shape with the curve's other terms held (bench/fit_engine.py); a shape not listed runs
    # at the curve (factors 1, the curve's launch_s).
    shapes: tuple[tuple[float, ...], ...] = ()
    fit_rows: NonNegativeInt = 0
    fit_median_error: NonNegative = 0.0
    fit_p90_error: NonNegative = 0.0

    @field_validator("shapes", mode="before")
    @classmethod
    def _shapes_from_text(cls, value: object) -> object:
        # A profile writes the table as text, one shape a line (a TOML array of arrays of
        # this size takes 20 times as long to parse, a cold start's cost).
        if not isinstance(value, str):
            return value
        rows = []
        for n, line in enumerate(value.strip().splitlines()):
            try:
                rows.append(tuple(float(v) for v in line.split()))
            except ValueError:
                raise ValueError(f"shapes line {n + 1}: {line.strip()!r} is not numbers") from None
        return tuple(rows)

    @field_validator("shapes")
    @classmethod
    def _shapes_valid(
        cls, rows: tuple[tuple[float, ...], ...], info: ValidationInfo
    ) -> tuple[tuple[float, ...], ...]:
        seen: dict[tuple[float, ...], int] = {}
        for i, row in enumerate(rows):
            if len(row) != SHAPE_COLUMNS:
                raise ValueError(
                    f"shapes[{i}] has {len(row)} numbers; expected {SHAPE_COLUMNS}: hidden, "
                    "local width, local experts, experts, top-k, compute factor, memory "
                    "factor, launch_s"
                )
            if not all(math.isfinite(v) and v > 0 for v in row):
                raise ValueError(f"shapes[{i}]: every number must be finite and > 0")
            if not all(float(row[j]).is_integer() for j in (0, 3, 4)):
                raise ValueError(f"shapes[{i}]: hidden, experts and top-k are whole numbers")
            key = tuple(row[:5])
            if key in seen:
                raise ValueError(f"shapes[{i}] repeats the shape of shapes[{seen[key]}]")
            seen[key] = i
            # A factor never lifts an efficiency above 1 (INV-25: the speed of light bounds).
            for j, field in ((5, "compute_efficiency"), (6, "memory_efficiency")):
                efficiency = info.data.get(field)
                if efficiency is not None and row[j] * efficiency > 1.0 + 1e-9:
                    raise ValueError(
                        f"shapes[{i}]: {field.removesuffix('_efficiency')} factor {row[j]:g} "
                        f"x {field} {efficiency:g} exceeds 1"
                    )
        return rows

    def shape_factors(
        self,
        hidden: float,
        width: ArrayLike,
        local_experts: ArrayLike,
        experts: float,
        top_k: float,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(compute factor, memory factor, launch_s) of the shapes listed in ``shapes``; (1,
        1, the curve's launch_s) where a shape was not measured."""
        w = np.asarray(width, dtype=np.float64)
        le = np.asarray(local_experts, dtype=np.float64)
        w, le = np.broadcast_arrays(w, le)
        rows = _shapes_of(self.shapes, float(hidden), float(experts), float(top_k))
        if len(rows) == 0:
            return np.ones(w.shape), np.ones(w.shape), np.full(w.shape, self.launch_s)
        hit = (np.abs(w[..., None] - rows[:, 1]) <= 1e-6 * rows[:, 1]) & (
            np.abs(le[..., None] - rows[:, 2]) <= 1e-6 * rows[:, 2]
        )
        found, which = hit.any(axis=-1), hit.argmax(axis=-1)
        return (
            np.where(found, rows[which, 5], 1.0),
            np.where(found, rows[which, 6], 1.0),
            np.where(found, rows[which, 7], self.launch_s),
        )

    def saturation(self, size: ArrayLike, tiles: ArrayLike | None = None) -> np.ndarray:
        """The share s of the compute peak a shape of ``size`` (and ``tiles``) can use."""
        x = np.asarray(size, dtype=np.float64)
        out = x / (x + self.half_size) if self.half_size > 0 else np.ones_like(x)
        if tiles is not None and self.half_tiles > 0:
            t = np.asarray(tiles, dtype=np.float64)
            out = out * t / (t + self.half_tiles)
        return out


class EngineProfile(ProfileBase):
    """A serving framework's measured efficiency curves on one GPU: what the operator model
    (physics/operators.py) needs to time a prefill pass or a decode step operator by
    operator. ``gemm_fp4`` and the MoE curves of a dtype a GPU has no data for are None: a
    model that needs one is timed at the nearest dtype's curve and the report says so."""

    KIND: ClassVar[str] = "engine"
    kind: Literal["engine"] = "engine"
    gpu: str = Field(pattern=ID_PATTERN)  # the GPU profile the curves were measured on
    framework: str
    framework_version: str
    gemm_bf16: OperatorCurve
    gemm_fp8: OperatorCurve
    gemm_fp4: OperatorCurve | None = None
    attention_prefill: OperatorCurve  # MHA/GQA prefill (FlashAttention)
    attention_decode: OperatorCurve  # MHA/GQA decode over a KV cache
    mla_prefill: OperatorCurve  # MLA prefill (non-absorbed: per-head K and V)
    mla_decode: OperatorCurve  # MLA decode (absorbed: over the latent cache)
    moe_bf16: OperatorCurve  # grouped expert GEMMs, BF16 weights
    moe_fp8: OperatorCurve  # grouped expert GEMMs, block-scaled FP8 weights
    moe_fp4: OperatorCurve | None = None  # grouped expert GEMMs, MXFP4 weights (w4a16)
    allreduce: (
        OperatorCurve  # NVLink all-reduce: launch_s its latency, memory_efficiency its link share
    )
    elementwise: OperatorCurve  # norms, activations, RoPE: memory-bound


CURVE_FIELDS: tuple[str, ...] = tuple(
    name for name, f in EngineProfile.model_fields.items() if "OperatorCurve" in str(f.annotation)
)


SCHEMAS: dict[str, type[ProfileBase]] = {
    "gpu": GpuProfile,
    "node": NodeProfile,
    "storage": StorageProfile,
    "model": ModelProfile,
    "workload": WorkloadProfile,
    "engine": EngineProfile,
}


def numeric_bounds(schema: type[ProfileBase], field: str) -> tuple[float, float] | None:
    """(low, high) of a numeric field from its schema constraints (gt/ge/lt/le; an open end
    moved in by 1e-6); None when the field is not a number."""
    info = schema.model_fields.get(field)
    if info is None or info.annotation not in (float, int):
        return None
    low, high = -math.inf, math.inf
    for c in info.metadata:
        for attr, pick_low in (("gt", True), ("ge", True), ("lt", False), ("le", False)):
            v = getattr(c, attr, None)
            if v is None:
                continue
            if pick_low:
                low = max(low, float(v) + (1e-6 if attr == "gt" else 0.0))
            else:
                high = min(high, float(v) - (1e-6 if attr == "lt" else 0.0))
    return low, high


def schema_for(kind: str) -> type[ProfileBase]:
    try:
        return SCHEMAS[kind]
    except KeyError:
        raise ValueError(
            f"unknown profile kind '{kind}'; expected one of {', '.join(KINDS)}"
        ) from None
