"""One PNG per workload: p90 and p99 latency against offered load.

x: offered load of the stepped runs (ops/s); y: latency in ms, log scale.
One colour per system, p99 solid and p90 dashed, the measured max of each
system as a dotted vertical line and the 10 ms SLO as a black dash-dot line.
800 x 500 pixels, so the committed PNGs stay small.

matplotlib is imported lazily: without it the report is still written, with
a note instead of the plots.
"""
import os

from .runner import lat
from .workloads import SLO_MS

COLOURS = {"shoal": "#1f77b4", "memcached": "#2ca02c", "cassandra": "#d62728"}


def available():
    try:
        import matplotlib  # noqa: F401  (only whether it imports)
        return True
    except ImportError:
        return False


def plot_workload(workload, outcomes, systems, path):
    """Writes the PNG; returns False when no system has stepped data."""
    series = [(systems[name], outcomes[name]) for name in workload.systems
              if name in outcomes and outcomes[name].steps]
    if not series:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for system, out in series:
        colour = COLOURS.get(system.name)
        xs = [s["offered"] for s in out.steps]
        for p, style in (("p99", "-"), ("p90", "--")):
            ys = [max(lat(s, p) / 1000, 1e-3) for s in out.steps]
            ax.plot(xs, ys, style, marker="o", markersize=3, color=colour,
                    label=f"{system.label} {p}")
        if out.max:
            ax.axvline(out.max.get("ops_per_s", 0), color=colour, linestyle=":", linewidth=1,
                       label=f"{system.label} max {out.max.get('ops_per_s', 0):,.0f} ops/s")
    ax.axhline(SLO_MS, color="black", linestyle="-.", linewidth=1, label=f"{SLO_MS:g} ms")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda x, _: f"{x / 1000:g}k" if x else "0"))
    ax.set_xlabel("offered load (ops/s)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(f"{workload.name}: latency against offered load")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True
