"""Draw the latency distributions of a benchmark run: ``python scripts/bench_plot.py bench.json out.png``.

One panel per form, upstream server and concurrency; one line per target: the share
of the calls (y) that took at most a given time (x, logarithmic). It runs with the
matplotlib of the benchmark's own environment (``scripts/.bench/venv``), which is not a
dependency of the project.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "direct": "#444444",
    "bridge": "#d62728",
    "mcp-remote": "#1f77b4",
    "mcp-proxy": "#2ca02c",
    "mcp-stdio": "#9467bd",
}


def main(data_file: str, png: str) -> None:
    with open(data_file, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    panels = [(case, level) for case in cases for level in ("c1", "c32")]
    columns = 2
    rows = (len(panels) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(12, 3.6 * rows), squeeze=False)
    for index, (case, level) in enumerate(panels):
        ax = axes[index // columns][index % columns]
        for name in case["targets"]:
            values = sorted(case[level].get(name, {}).get("all") or [])
            if not values:
                continue
            n = len(values)
            xs = [v * 1e6 for v in values]
            ys = [(i + 1) / n for i in range(n)]
            ax.plot(xs, ys, label=name, color=COLORS.get(name), linewidth=1.6 if name == "bridge" else 1.1)
        concurrency = "1" if level == "c1" else "32"
        ax.set_title(
            f"{case['form']} form, {case['upstream']} upstream, concurrency {concurrency}", fontsize=10
        )
        ax.set_xscale("log")
        ax.set_xlabel("latency of a small tools/call (µs)")
        ax.set_ylabel("share of calls")
        ax.axhline(0.5, color="#bbbbbb", linewidth=0.6)
        ax.axhline(0.99, color="#bbbbbb", linewidth=0.6)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="lower right")
    for index in range(len(panels), rows * columns):
        axes[index // columns][index % columns].axis("off")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
