"""Fit the EP latency floor (``ep_latency_s``, ``ep_link_efficiency``) of a node to DeepEP's
published low-latency kernel times (docs/model.md section 5).

Source: https://github.com/deepseek-ai/DeepEP/blob/main/docs/legacy.md, "Low-latency kernels
with pure RDMA": H800, one ConnectX-7 400 Gb/s InfiniBand NIC per GPU (the DualPath testbed's
hardware), 128 tokens per GPU, hidden 7168, top-8 experts, FP8 dispatch, BF16 combine.

Model (dualpath_plan/physics/latency.py): dispatch + combine of one MoE layer takes
ep_latency_s + off-node share x payload / (CNIC rate x ep_link_efficiency), with the payload per
GPU = tokens x top-k x hidden x (1 + 4/128 + 2) bytes and the off-node share 1 - 8 / EP. The
internode rows (EP 16 to 256) are fitted by least squares; EP 8 (intranode) is printed for
comparison with the NVLink term.

    python bench/fit_ep.py
"""

from __future__ import annotations

import numpy as np

# EP size -> (dispatch us, combine us), DeepEP docs/legacy.md.
DEEPEP_LOW_LATENCY_US = {
    8: (77, 114),
    16: (118, 195),
    32: (155, 273),
    64: (173, 314),
    128: (192, 369),
    256: (194, 360),
}
TOKENS, TOPK, HIDDEN, GPUS_PER_NODE = 128, 8, 7168, 8
CNIC_BYTE_S = 400e9 / 8  # one 400 Gb/s CX7 per GPU
PAYLOAD = TOKENS * TOPK * HIDDEN * (1.0 + 4.0 / 128.0 + 2.0)


def main() -> None:
    ep = np.array([k for k in DEEPEP_LOW_LATENCY_US if k > GPUS_PER_NODE], dtype=float)
    t = np.array([sum(DEEPEP_LOW_LATENCY_US[int(k)]) for k in ep]) * 1e-6
    off = 1.0 - GPUS_PER_NODE / ep
    a = np.column_stack([np.ones_like(off), off * PAYLOAD / CNIC_BYTE_S])
    (latency, inverse_eff), *_ = np.linalg.lstsq(a, t, rcond=None)
    efficiency = 1.0 / inverse_eff
    print(f"ep_latency_s = {latency:.4g}  ({latency * 1e6:.1f} us, dispatch + combine)")
    print(f"ep_link_efficiency = {efficiency:.3f}")
    print("EP  measured_us  model_us")
    for k, m, x in zip(ep, t, a @ np.array([latency, inverse_eff]), strict=True):
        print(f"{int(k):>3}  {m * 1e6:>11.0f}  {x * 1e6:>8.0f}")


if __name__ == "__main__":
    main()
