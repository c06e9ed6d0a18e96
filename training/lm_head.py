"""Score only the labelled positions in trl's fused LM head on CPU.

trl's SFTTrainer projects the hidden states through the LM head in tiles (``add_fused_lm_head``). On a
Triton device it first keeps only the positions whose label is not -100; elsewhere it scores every
position, because on compiled backends (Neuron) a changing number of positions would recompile the
tiles at every batch (trl/trainer/utils.py). Eager CPU training recompiles nothing, so that choice only
costs: with completion-only loss, 80-90 % of the positions (the prompt) are projected through the
8k-entry vocabulary and thrown away, which was about 60 % of a tiny-profile step here
(docs/training.md, "CPU throughput"). The compact path is trl's own code (the same tiles, the
same loss; ``tests/test_lm_head.py`` checks equal loss and gradients); this module only makes trl take it
on CPU.
"""

from __future__ import annotations

import functools
from typing import Any


def compact_on_cpu() -> bool:
    """Make trl's fused LM head score only labelled positions on CPU. Idempotent; returns whether trl has the
    hook this relies on (an older or newer trl without it is left alone and scores every position)."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - trl is a dependency
        return False
    original = getattr(trl_utils, "_use_triton", None)
    if original is None or not callable(original):
        return False
    if getattr(original, "_forethought_compact_cpu", False):
        return True

    @functools.wraps(original)
    def compact(device: Any) -> bool:
        return getattr(device, "type", None) == "cpu" or original(device)

    compact._forethought_compact_cpu = True  # type: ignore[attr-defined]
    compact._forethought_original = original  # type: ignore[attr-defined]
    trl_utils._use_triton = compact
    return True


def restore() -> None:
    """Undo :func:`compact_on_cpu` (the tests compare both paths)."""
    import trl.trainer.utils as trl_utils

    original = getattr(trl_utils._use_triton, "_forethought_original", None)
    if original is not None:
        trl_utils._use_triton = original
