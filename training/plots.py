"""Loss-curve PNG of a run (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from forethought.primitives.io import atomic_write_bytes


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def loss_series(log_history: list[dict[str, Any]]) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    # a diverged loss is NaN in memory and null once written (primitives/io.py dumps_json): neither is a point
    train = [(int(e["step"]), float(e["loss"])) for e in log_history if _number(e.get("loss")) and "step" in e]
    evals = [
        (int(e["step"]), float(e["eval_loss"])) for e in log_history if _number(e.get("eval_loss")) and "step" in e
    ]
    return train, evals


def plot_loss(
    log_history: list[dict[str, Any]], path: str | Path, title: str, *, ylabel: str = "loss (completion tokens)"
) -> Path:
    """Train and eval loss against optimizer steps; ``ylabel`` names the tokens the loss is on (the base stage's
    ``prompt`` loss is on the requests, not on completions)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    train, evals = loss_series(log_history)
    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    if train:
        ax.plot(
            [s for s, _ in train], [v for _, v in train], label="train loss", marker="." if len(train) < 30 else None
        )
    if evals:
        ax.plot([s for s, _ in evals], [v for _, v in evals], label="eval loss", marker="o", linestyle="--")
    if not train and not evals:
        ax.text(0.5, 0.5, "no loss logged", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if train or evals:
        ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return atomic_write_bytes(path, buf.getvalue())


def plot_em(history: list[dict[str, Any]], path: str | Path, title: str) -> Path:
    """Exact match (%) against optimizer step, one line per ``em/<primitive>`` key."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    keys = sorted({k for h in history for k in h if k.startswith("em/")})
    for k in keys:
        pts = [(h["step"], 100 * h[k]) for h in history if k in h]
        ax.plot([s for s, _ in pts], [v for _, v in pts], label=k[3:], marker=".")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("exact match (%)")
    ax.set_ylim(-2, 102)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    if keys:
        ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return atomic_write_bytes(path, buf.getvalue())
