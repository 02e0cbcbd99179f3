"""The pictures of the labs: one matplotlib style, deterministic PNGs, five chart kinds.

Every lab draws with these helpers, so every picture looks alike and says what it shows:

- :func:`figure` — a new figure with ``rows x cols`` panels and a title (the claim the
  picture carries); the helpers below draw into one panel (``ax=``) or make their own.
- :func:`bars` — one bar per item (records per partition ...) with the **average** as a
  dashed line and, when a verdict depends on one, the **limit** as a red line; bars above
  the limit are drawn red and marked with their value.
- :func:`grouped` — side-by-side bars, one colour per series (e.g. two protocols per trial).
- :func:`timeline` — partition ownership over time: one row per partition, coloured by the
  member that owned it, hatched grey while nobody did (paused), with labelled events.
- :func:`grid` — a matrix of counts (e.g. keys by partition before × after a change), each
  cell annotated; a cell on the diagonal is a key that stayed put.
- :func:`lines` — series over time (throughput, lag ...) with an optional limit and events.
- :func:`save` — write a figure as ``<plot_dir>/<name>.png`` and return the path.

Determinism: the Agg renderer (``savefig`` of a bare ``Figure`` picks it; the process's
backend is left alone), a fixed size (:data:`SIZE` inches at :data:`DPI`), a fixed
style (:data:`STYLE`, DejaVu Sans, which matplotlib ships) applied whatever the user's
``matplotlibrc`` says, fixed colours (:data:`PALETTE`, assigned in the order names are
first given) and PNG metadata without the ``Software`` entry, so the same data give the
same bytes. Nothing touches pyplot's global figure list (figures are plain
:class:`matplotlib.figure.Figure` objects), so figures are freed with their last reference.

Safety: :func:`save` writes only inside ``plot_dir`` (it creates it), refuses names with a
path separator, and writes through a temporary file renamed into place, so a picture is
either complete or absent. Thread-safety: a figure belongs to one thread; helpers keep no
state between calls.
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager
from typing import Iterator, Mapping, Optional, Sequence

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure      # used directly: no pyplot, no GUI backend, no global list
from matplotlib.patches import Patch

from kafkasim.errors import InvalidArgumentError

__all__ = ["DPI", "SIZE", "STYLE", "PALETTE", "UNOWNED", "RESTORING", "figure", "bars", "grouped", "timeline", "grid",
           "lines", "save", "colour_map"]

DPI = 100
"""Dots per inch of every PNG."""

SIZE = (10.0, 5.6)
"""Default figure size in inches (1000 x 560 pixels at :data:`DPI`)."""

STYLE = {
    "font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 11, "figure.titlesize": 13,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "savefig.dpi": DPI, "path.simplify": False, "svg.hashsalt": "kafkasim",
}
"""The rc settings every picture is drawn and saved with."""

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94"]
"""Member / series colours, in order (red is kept for limits and alerts)."""

UNOWNED = "#d9d9d9"
"""Fill of a partition while nobody owns it (paused)."""

RESTORING = "restoring"
"""The owner name :func:`timeline` draws as a new owner restoring state (paused too)."""
RESTORE_FILL = "#fdd0a2"

LIMIT = "#d62728"
AVERAGE = "#444444"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(STYLE):
        yield


def figure(title: str, rows: int = 1, cols: int = 1, *, size: Optional[tuple] = None,
           sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure titled ``title`` with ``rows x cols`` panels; returns it and its axes (flat)."""
    if not title:
        raise InvalidArgumentError("a lab picture needs a title saying what it shows")
    with _style():
        fig = Figure(figsize=size or SIZE, dpi=DPI, layout="constrained")
        axes = fig.subplots(rows, cols, sharey=sharey, squeeze=False)
        fig.suptitle(title)
    return fig, [ax for row in axes for ax in row]


def _panel(ax: Optional[Axes], title: str) -> Axes:
    if ax is None:
        _, (ax,) = figure(title)
    else:
        ax.set_title(title)
    return ax


def _num(v: float) -> str:
    """A number for a label: one decimal below 100, thousands separators above."""
    return f"{v:,.1f}" if abs(v) < 100 and v != int(v) else f"{v:,.0f}"


def colour_map(names: Sequence[str]) -> dict[str, str]:
    """``{name: colour}`` from :data:`PALETTE`, in the order given (cycling past its end)."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(dict.fromkeys(names))}


def bars(labels: Sequence[str], values: Sequence[float], *, title: str, xlabel: str,
         ylabel: str, ax: Optional[Axes] = None, average: bool = True,
         limit: Optional[float] = None, limit_label: str = "limit",
         colour: str = PALETTE[0]) -> Figure:
    """Bars of ``values`` at ``labels``; the average dashed, ``limit`` red, bars above it red."""
    if len(labels) != len(values) or not values:
        raise InvalidArgumentError(f"bars: {len(labels)} labels for {len(values)} values")
    with _style():
        ax = _panel(ax, title)
        over = [limit is not None and v > limit for v in values]
        xs = list(range(len(values)))
        ax.bar(xs, values, color=[LIMIT if o else colour for o in over], width=0.8)
        ax.set_xticks(xs, [str(x) for x in labels], rotation=90 if len(xs) > 16 else 0)
        if average:
            avg = sum(values) / len(values)
            ax.axhline(avg, color=AVERAGE, linestyle="--", linewidth=1.2,
                       label=f"average {_num(avg)}")
        if limit is not None:
            ax.axhline(limit, color=LIMIT, linewidth=1.5, label=f"{limit_label} {_num(limit)}")
            for x, v, o in zip(xs, values, over):
                if o:
                    ax.annotate(_num(v), (x, v), ha="center", va="bottom", fontsize=8,
                                color=LIMIT, xytext=(0, 2), textcoords="offset points")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if average or limit is not None:
            ax.legend(loc="upper right", fontsize=8)
    return ax.figure


def grouped(labels: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str,
            xlabel: str, ylabel: str, ax: Optional[Axes] = None) -> Figure:
    """Side-by-side bars: one group per label, one bar (and colour) per series."""
    colours = colour_map(list(series))
    width = 0.8 / max(1, len(series))
    with _style():
        ax = _panel(ax, title)
        for i, (name, values) in enumerate(series.items()):
            if len(values) != len(labels):
                raise InvalidArgumentError(
                    f"grouped: series {name!r} has {len(values)} values for {len(labels)} labels")
            ax.bar([x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))],
                   values, width=width, label=name, color=colours[name])
        ax.set_xticks(range(len(labels)), [str(x) for x in labels])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(loc="best", fontsize=8)
    return ax.figure


def timeline(rows: Sequence[str], spans: Sequence[tuple], *, title: str,
             xlabel: str = "time (s)", ax: Optional[Axes] = None,
             events: Sequence[tuple] = (), owners: Optional[Sequence[str]] = None) -> Figure:
    """Ownership over time: ``spans`` are ``(row, start, end, owner or None)``; one bar row
    per entry of ``rows`` (top to bottom), coloured by owner, hatched grey when ``None``
    (nobody owned it: paused), dotted orange when the owner is :data:`RESTORING` (a new owner
    rebuilding the partition's state: paused too). ``events`` are ``(time, label)`` drawn as labelled vertical
    lines. ``owners`` fixes the colour order (default: order of first appearance)."""
    index = {r: i for i, r in enumerate(rows)}
    names = list(owners) if owners is not None else [o for _, _, _, o in spans
                                                     if o is not None and o != RESTORING]
    colours = colour_map(names)
    with _style():
        ax = _panel(ax, title)
        for row, start, end, owner in spans:
            if row not in index:
                raise InvalidArgumentError(f"timeline: span on unknown row {row!r}")
            if end <= start:
                continue
            y = len(rows) - 1 - index[row]
            if owner is None:
                ax.barh(y, end - start, left=start, height=0.7, color=UNOWNED, hatch="///",
                        edgecolor="#999999", linewidth=0)
            elif owner == RESTORING:
                ax.barh(y, end - start, left=start, height=0.7, color=RESTORE_FILL, hatch="...",
                        edgecolor="#e6550d", linewidth=0)
            else:
                ax.barh(y, end - start, left=start, height=0.7, color=colours[owner])
        ax.set_yticks(range(len(rows)), list(reversed(rows)))
        ax.set_ylim(-0.6, len(rows) + (0.3 if events else -0.4))   # room above for event labels
        ax.grid(axis="y", visible=False)
        top = len(rows) + 0.25
        for t, label in events:
            ax.axvline(t, color=LIMIT, linewidth=1, linestyle=":")
            ax.text(t, top, f" {label}", color=LIMIT, fontsize=8, va="top", ha="left",
                    rotation=0)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("partition")
        handles = [Patch(color=c, label=n) for n, c in colours.items()]
        handles.append(Patch(facecolor=UNOWNED, hatch="///", edgecolor="#999999",
                             label="no owner (paused)"))
        if any(o == RESTORING for _, _, _, o in spans):
            handles.append(Patch(facecolor=RESTORE_FILL, hatch="...", edgecolor="#e6550d",
                                 label="restoring state (paused)"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
                  title="owner")
    return ax.figure


def grid(matrix: Sequence[Sequence[float]], row_labels: Sequence[str],
         col_labels: Sequence[str], *, title: str, xlabel: str, ylabel: str,
         ax: Optional[Axes] = None, annotate: bool = True, colourbar: str = "count",
         cmap: str = "Blues") -> Figure:
    """A heat map of ``matrix`` (rows x cols) with labelled axes, each cell annotated."""
    if len(matrix) != len(row_labels) or any(len(r) != len(col_labels) for r in matrix):
        raise InvalidArgumentError(
            f"grid: matrix is not {len(row_labels)} x {len(col_labels)} like its labels")
    with _style():
        ax = _panel(ax, title)
        im = ax.imshow([list(r) for r in matrix], cmap=cmap, aspect="auto",
                       interpolation="nearest")
        ax.grid(False)
        step_c = max(1, len(col_labels) // 32)
        step_r = max(1, len(row_labels) // 32)
        ax.set_xticks(range(0, len(col_labels), step_c), list(col_labels)[::step_c],
                      rotation=90 if len(col_labels) > 16 else 0)
        ax.set_yticks(range(0, len(row_labels), step_r), list(row_labels)[::step_r])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        high = max((v for r in matrix for v in r), default=0)
        if annotate and len(row_labels) * len(col_labels) <= 400:
            for i, r in enumerate(matrix):
                for j, v in enumerate(r):
                    if v:
                        ax.text(j, i, f"{v:,.0f}", ha="center", va="center", fontsize=7,
                                color="white" if v > high / 2 else "black")
        ax.figure.colorbar(im, ax=ax, label=colourbar, shrink=0.8)
    return ax.figure


def lines(x: Sequence[float], series: Mapping[str, Sequence[float]], *, title: str,
          xlabel: str, ylabel: str, ax: Optional[Axes] = None, limit: Optional[float] = None,
          limit_label: str = "limit", events: Sequence[tuple] = (), step: bool = False) -> Figure:
    """One line per entry of ``series`` over ``x``; optional red ``limit`` and ``events``."""
    colours = colour_map(list(series))
    with _style():
        ax = _panel(ax, title)
        for name, ys in series.items():
            if len(ys) != len(x):
                raise InvalidArgumentError(f"lines: series {name!r} has {len(ys)} points, x has {len(x)}")
            if step:
                ax.step(x, ys, where="post", label=name, color=colours[name], linewidth=1.5)
            else:
                ax.plot(x, ys, label=name, color=colours[name], linewidth=1.5)
        if limit is not None:
            ax.axhline(limit, color=LIMIT, linewidth=1.5, label=f"{limit_label} {_num(limit)}")
        for t, label in events:
            ax.axvline(t, color=LIMIT, linewidth=1, linestyle=":")
            ax.annotate(f" {label}", (t, 1.0), xycoords=("data", "axes fraction"),
                        color=LIMIT, fontsize=8, va="top")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if series or limit is not None:
            ax.legend(loc="best", fontsize=8)
    return ax.figure


def save(fig: Figure, plot_dir: str, name: str) -> str:
    """Write ``fig`` to ``<plot_dir>/<name>.png`` (``plot_dir`` created) and return the path.

    ``name`` is a plain file name (letters, digits, ``_ . -``; ``.png`` added if missing);
    anything that could leave ``plot_dir`` is an InvalidArgumentError naming it. The PNG is
    written to a temporary file in ``plot_dir`` and renamed into place.
    """
    base = name if name.endswith(".png") else f"{name}.png"
    if not _NAME.match(base) or ".." in base:
        raise InvalidArgumentError(f"picture name {name!r} is not a plain file name")
    plot_dir = os.fspath(plot_dir)
    os.makedirs(plot_dir, exist_ok=True)
    path = os.path.join(plot_dir, base)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=plot_dir)
    try:
        with os.fdopen(fd, "wb") as f, _style():
            fig.savefig(f, format="png", dpi=DPI, metadata={"Software": None})
        os.chmod(tmp, 0o644)                   # mkstemp made it private; a picture is for sharing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
