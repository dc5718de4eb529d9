"""One plotting style for every notebook: figures that read alone.

Rules every figure follows (issue "What a reviewer and a student see"):

- the title says **what** is shown and **on what data** (real / synthetic / model / fit, and ``n``):
  :func:`title`;
- axes are labelled with units; counts and steps get integer ticks: :func:`integer_ticks`;
- every mark has a legend entry; an interval says what it is (``95% bootstrap CI``, ``min-max over seeds``);
- a quantity that is undefined is not drawn as zeros: the panel says why instead (:func:`undefined`);
- numbers from a model, a fit or a simulation carry that word on the figure (:func:`mark_source`).

Usage in a notebook::

    from codegrep import plots
    fig, ax = plots.subplots()
    ax.plot(...)
    plots.title(ax, "Reward per GRPO step", data="real", n=86)
    plots.integer_ticks(ax, "x")
"""
from __future__ import annotations

from typing import Any, Iterable

SOURCES = {
    "real": "measured on real data",
    "measured": "measured",
    "synthetic": "synthetic data",
    "model": "MODEL (replay cost model)",
    "fit": "FIT (observational estimate)",
    "simulation": "SIMULATION",
    "reference": "paper value (reference)",
}
"""How each kind of number is marked, the same words everywhere (figures, notebooks, report)."""

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
"""Colour-blind-safe (Okabe-Ito) colours, in the order series are drawn."""

RC = {
    "figure.dpi": 100, "savefig.dpi": 120, "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9,
    "legend.fontsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8, "axes.spines.top": False,
    "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3, "figure.constrained_layout.use": True,
}
"""matplotlib settings applied by :func:`use_style`."""


def use_style() -> None:
    """Apply the bundle's style (idempotent); notebooks call it once, :func:`subplots` calls it too."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update(RC)
    mpl.rcParams["axes.prop_cycle"] = cycler(color=list(PALETTE))


def subplots(nrows: int = 1, ncols: int = 1, width: float | None = None, height: float = 3.2, **kw: Any):
    """``plt.subplots`` with the bundle's style and a size that fits the panels."""
    import matplotlib.pyplot as plt

    use_style()
    return plt.subplots(nrows, ncols, figsize=(width or 4.2 * ncols + 0.6, height * nrows), **kw)


def describe(data: str, n: int | None = None, unit: str = "instances") -> str:
    """The "on what data" part of a title.

    >>> describe("real", 86)
    'real data, n = 86 instances'
    >>> describe("model")
    'MODEL (replay cost model)'
    >>> describe("SWE-bench Verified (real)", 12, "runs")
    'SWE-bench Verified (real), n = 12 runs'
    """
    label = SOURCES.get(data, data)
    if data == "real":
        label = "real data"
    return label if n is None else f"{label}, n = {n:,} {unit}"


def title(ax: Any, what: str, data: str | None = None, n: int | None = None, unit: str = "instances") -> None:
    """Set a two-part title: what is shown, then on what data (and how many)."""
    ax.set_title(what if data is None else f"{what}\n{describe(data, n, unit)}")


def integer_ticks(ax: Any, axis: str = "both") -> None:
    """Integer tick locations on ``x``, ``y`` or ``both`` axes (counts, steps, rounds).

    >>> import matplotlib.pyplot as plt
    >>> fig, ax = subplots(); _ = ax.plot([2], [0.5], "o"); integer_ticks(ax, "x"); fig.draw_without_rendering()
    >>> lo, hi = ax.get_xlim(); [float(t) for t in ax.get_xticks() if lo <= t <= hi]
    [2.0]
    >>> plt.close(fig)
    """
    from matplotlib.ticker import MaxNLocator

    if axis in ("x", "both"):  # min_n_ticks=1: an axis around one value (a single step) still ticks integers only
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    if axis in ("y", "both"):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def undefined(ax: Any, what: str, reason: str) -> None:
    """Replace a panel whose quantity is undefined by a sentence saying why (never a row of zeros)."""
    ax.clear()
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(what)
    ax.text(0.5, 0.5, f"not defined in this run:\n{reason}", ha="center", va="center", wrap=True,
            fontsize=9, color="0.3", transform=ax.transAxes)


NOTE_GID = "codegrep-source-note"
"""Marks the text :func:`mark_source` stamps, so :func:`place_notes` can find it."""


def mark_source(fig: Any, data: str, detail: str = "") -> None:
    """Stamp the figure with what produced its numbers (model / fit / simulation ...): lower right, placed below
    everything else when the figure is saved (:func:`place_notes`)."""
    text = SOURCES.get(data, data) + (f": {detail}" if detail else "")
    fig.text(0.995, 0.002, text, ha="right", va="top", fontsize=7, color="0.35", style="italic", gid=NOTE_GID)


def place_notes(fig: Any) -> None:
    """Move the figure's :func:`mark_source` notes under everything else it draws (axis labels, legends below the
    axes), right-aligned to its drawn extent and stacked, so a note never overlaps a label; a saved figure's
    ``bbox_inches="tight"`` then takes them in. Call just before saving.

    >>> import matplotlib.pyplot as plt
    >>> fig, ax = subplots(1, 1, width=6); _ = ax.set_xlabel("GRPO step"); mark_source(fig, "model", "x" * 60)
    >>> place_notes(fig); fig.draw_without_rendering(); r = fig.canvas.get_renderer()
    >>> bool(fig.texts[0].get_window_extent(r).y1 <= ax.xaxis.label.get_window_extent(r).y0)
    True
    >>> plt.close(fig)
    """
    notes = [t for t in fig.texts if t.get_gid() == NOTE_GID]
    if not notes:
        return
    renderer = fig.canvas.get_renderer()
    for t in notes:
        t.set_visible(False)
    fig.draw_without_rendering()  # run the layout engine first: it moves the axes and their labels
    box = fig.get_tightbbox(renderer)  # inches, everything but the notes
    for t in notes:
        t.set_visible(True)
    width, height = fig.get_size_inches()
    y = box.y0 / height - 0.01
    for t in notes:
        t.set_horizontalalignment("right")
        t.set_verticalalignment("top")
        t.set_position((box.x1 / width, y))
        y -= t.get_window_extent(renderer).height / fig.dpi / height * 1.15


def save(fig: Any, path: Any) -> Any:
    """Save ``fig`` to ``path`` (PNG or SVG by its suffix) after :func:`place_notes`, whole or not at all
    (``codegrep.files.atomic_write``); returns the path."""
    from pathlib import Path

    from codegrep.files import atomic_write

    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in ("png", "svg"):
        raise ValueError(f"{path}: a figure is saved as .png or .svg, not {path.suffix or 'no suffix'!r}")
    place_notes(fig)
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, bbox_inches="tight", format=kind, **({"dpi": 120} if kind == "png" else {}))
    return path


def interval_label(kind: str = "bootstrap", level: float = 0.95, n: int | None = None) -> str:
    """Legend text for a band or error bar.

    >>> interval_label()
    '95% bootstrap CI'
    >>> interval_label("seeds", n=3)
    'min-max over 3 seeds'
    >>> interval_label("t", 0.9)
    '90% t-interval'
    """
    if kind == "seeds":
        return f"min-max over {n} seeds" if n else "min-max over seeds"
    if kind == "t":
        return f"{level:.0%} t-interval"
    return f"{level:.0%} {kind} CI"


def log_axis_positive(values: Iterable[float]) -> bool:
    """Whether every value can go on a log axis (positive and finite); a zero must be shown another way.

    >>> log_axis_positive([0.1, 2.0])
    True
    >>> log_axis_positive([0.0, 2.0])
    False
    """
    import math

    vals = list(values)
    return bool(vals) and all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in vals)


def paired_hits(ax: Any, a: Iterable[bool], b: Iterable[bool], name_a: str, name_b: str) -> None:
    """A 2x2 table of paired binary outcomes (e.g. top-1 hit) on the same instances, counts written in; the
    off-diagonal cells are where the two differ (what a paired test reads)."""
    import numpy as np

    a, b = [bool(x) for x in a], [bool(x) for x in b]
    table = np.zeros((2, 2), dtype=int)
    for x, y in zip(a, b):
        table[int(x), int(y)] += 1
    ax.imshow(table, cmap="Blues", vmin=0, vmax=max(int(table.max()), 1))
    for i in range(2):
        for j in range(2):
            ax.text(j, i, f"{table[i, j]:,}", ha="center", va="center", fontsize=11,
                    color="white" if table[i, j] > table.max() / 2 else "black")
    ax.set_xticks([0, 1], [f"{name_b} miss", f"{name_b} hit"])
    ax.set_yticks([0, 1], [f"{name_a} miss", f"{name_a} hit"])
    ax.grid(False)


def paired_scatter(ax: Any, a: Iterable[float], b: Iterable[float], name_a: str, name_b: str,
                   seed: int = 0) -> None:
    """Per-instance values of two methods on the same instances (x: ``name_b``, y: ``name_a``), jittered so that
    ties stay visible, with the diagonal (equal)."""
    import numpy as np

    a, b = np.asarray(list(a), float), np.asarray(list(b), float)
    rng = np.random.default_rng(seed)
    jit = lambda v: v + rng.uniform(-0.02, 0.02, v.size)  # noqa: E731
    ax.plot([0, 1], [0, 1], color="0.5", lw=0.8, ls="--", label="equal")
    ax.scatter(jit(b), jit(a), s=14, alpha=0.6, color=PALETTE[0], label="one instance (jittered)")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(name_b)
    ax.set_ylabel(name_a)


def draw(specs: dict[str, tuple[Any, str, Any]], result: Any, out: Any, names: Iterable[str] = (),
         absent: Iterable[str] = ()) -> dict[str, Any]:
    """A stage's ``figures(result, out, *names)``: draw each named figure of ``specs`` (all when ``names`` is empty)
    and save it through ``out.figure``. ``specs`` maps a name to ``(draw(result) -> Figure, file name, note)``,
    ``note`` being text stamped on the figure, a function of ``result`` giving it, or None. Figures in ``absent``
    have no data in this run (an optional part that did not run): they are not drawn (the stage's text says why).

    >>> class Out:
    ...     def figure(self, fig, name, note=None): self.saved = (fig, name, note)
    >>> out = Out()
    >>> draw({"a": (lambda r: f"fig of {r}", "01_a", lambda r: f"n={r}")}, 3, out)
    {'a': 'fig of 3'}
    >>> out.saved
    ('fig of 3', '01_a', 'n=3')
    >>> draw({"a": (str, "01_a", None)}, 3, out, ["b"])
    Traceback (most recent call last):
    ...
    ValueError: unknown figure(s) ['b']; this stage draws ['a']
    >>> draw({"a": (str, "01_a", None)}, 3, out, ["a"], absent=["a"])
    {}
    """
    names = list(names) or list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ValueError(f"unknown figure(s) {unknown}; this stage draws {list(specs)}")
    drawn = {}
    for name in (n for n in names if n not in set(absent)):
        func, file_name, note = specs[name]
        drawn[name] = func(result)
        out.figure(drawn[name], file_name, note=note(result) if callable(note) else note)
    return drawn
