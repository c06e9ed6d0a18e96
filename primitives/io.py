"""Atomic file output: a crash never leaves a half-written file behind."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # what open() would give a new file (mkstemp alone gives 0600)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_json(obj: Any, *, indent: int | None = 2) -> str:
    """Strict JSON, as every reader of the project's files requires (forethought/bounded.py): a NaN or infinite
    float (a diverged loss, a metric over no rows) is written as null, never as the ``NaN`` token Python's json
    writes by default, which no strict reader (and no other language's parser) accepts."""
    try:
        text = json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=False, default=str, allow_nan=False)
    except ValueError:  # only then walk the object: the common case pays nothing
        text = json.dumps(_finite(obj), indent=indent, ensure_ascii=False, sort_keys=False, default=str)
    return text + "\n"


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    return atomic_write_text(path, dumps_json(obj, indent=indent))


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    text = "".join(dumps_json(r, indent=None) for r in rows)
    return atomic_write_text(path, text)


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """One strict JSON value per non-blank line (forethought/bounded.py: no NaN, no key given twice), located by line."""
    from forethought.bounded import JSONProblem, loads_json

    out = []
    with open(path, encoding="utf-8") as handle:
        for i, line in enumerate(handle, start=1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(loads_json(line, str(path)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{i}: not valid JSON: {exc.msg}") from None
            except JSONProblem as exc:
                raise ValueError(f"{path}:{i}: {exc.detail}") from None
    return out


PANELS_KEY = "forethought-panels"  # the PNG text chunk that says what each panel of a figure holds


def figure_panels(fig: Any) -> list[dict[str, Any]]:
    """What each panel (axes) of a matplotlib figure holds: its title, axis labels, category tick labels, and every
    series drawn in it (lines with their finite points, bar groups with their bars, scatters with their points).

    Written into the PNG by :func:`atomic_write_figure`, so a test (or a reader) can check a plot from its file: no
    empty panel, the axes it claims."""
    panels = []
    for ax in fig.get_axes():
        series: list[dict[str, Any]] = []
        for line in ax.get_lines():
            xs, ys = line.get_xdata(), line.get_ydata()
            n = sum(1 for x, y in zip(xs, ys, strict=False) if _is_finite_number(x) and _is_finite_number(y))
            series.append({"kind": "line", "label": str(line.get_label()), "points": n})
        for container in ax.containers:
            series.append({"kind": "bars", "label": str(container.get_label()), "points": len(container.patches)})
        for coll in ax.collections:
            series.append({"kind": "scatter", "label": str(coll.get_label()), "points": len(coll.get_offsets())})
        panels.append(
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                # named categories only (bars per primitive, per setting), not numeric ticks
                "xticklabels": _named_ticks(ax.xaxis),
                "series": series,
                "points": sum(s["points"] for s in series),
            }
        )
    return panels


def _named_ticks(axis: Any) -> list[str]:
    """The tick labels of an axis whose ticks were set by hand (``set_xticks(positions, labels)``); [] for numbers."""
    from matplotlib.ticker import FixedLocator

    if not isinstance(axis.get_major_locator(), FixedLocator):
        return []
    return [t.get_text() for t in axis.get_ticklabels()]


def _is_finite_number(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def atomic_write_figure(path: str | os.PathLike, fig: Any, *, dpi: int = 110) -> Path:
    """Render a matplotlib figure to PNG in memory, write it atomically, and close it.

    The PNG carries :func:`figure_panels` as JSON in its ``forethought-panels`` text chunk."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    panels = json.dumps(figure_panels(fig), ensure_ascii=True)
    fig.savefig(buf, format="png", dpi=dpi, metadata={PANELS_KEY: panels})
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def png_panels(path: str | os.PathLike) -> list[dict[str, Any]] | None:
    """The panel record a PNG written by :func:`atomic_write_figure` carries (None: it carries none)."""
    from PIL import Image

    with Image.open(path) as im:
        im.load()
        text = getattr(im, "text", {}).get(PANELS_KEY)
    return None if text is None else json.loads(text)
