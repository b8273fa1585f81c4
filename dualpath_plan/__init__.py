"""dualpath-plan: capacity planning for P/D-disaggregated LLM inference whose KV-cache lives in
external storage, with DeepSeek's DualPath dual read path (arXiv 2602.21548).

The library never imports the CLI: ``from dualpath_plan.profiles.registry import Registry``,
``dualpath_plan.physics``, ``dualpath_plan.solvers`` are usable from Python directly.
"""

__version__ = "0.1.0"
