"""A PNG of tuning results: the figure (e.g. TFLOP/s) by problem, tuned vs default vs vendor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def plot_results(path: Path, title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]],
                 ylabel: str) -> Path:
    """One group of bars per problem, one bar per series; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(len(series), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(labels) * len(series)), 4.5))
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))], values, width, label=name)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))])
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(f"{ylabel} (log scale)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path
