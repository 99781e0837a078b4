#!/usr/bin/env python3
"""Plots the scale benchmark's CSV rows (`ksm-scale-bench --csv`) against the number of
ServiceSets: time to converge, peak RSS and requests per ServiceSet, on log-log axes with the
line of linear growth through the smallest run, so that a curve bending away from it shows at
once. Usage: plot.py scale.csv scale.png  (needs matplotlib)."""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source, target):
    rows = [r for r in csv.DictReader(open(source)) if r["apiserver"] == "simulator"]
    rows.sort(key=lambda r: int(r["servicesets"]))
    n = [int(r["servicesets"]) for r in rows]
    # (title, column, the restart's column beside it, log y axis with the linear line)
    panels = [
        ("time to converge (s)", "converge_s", "restart_steady_s", True),
        ("adapter CPU while converging (s)", "adapter_cpu_s", "restart_cpu_s", True),
        ("peak RSS of the adapter (MiB)", "peak_rss_mib", "restart_peak_rss_mib", True),
        ("API requests per ServiceSet", "requests_per_serviceset", None, False),
    ]
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8))
    for axis, (title, column, restart, log) in zip(axes, panels):
        values = [float(r[column]) for r in rows]
        axis.plot(n, values, "o-", label="first start")
        measured = [(int(r["servicesets"]), float(r[restart])) for r in rows if restart and r[restart]]
        if measured:
            axis.plot(*zip(*measured), "s-", label="restart, nothing to do")
        if column == "peak_rss_mib" and len(n) > 1:
            # Memory is a fixed part plus a part per ServiceSet: the line through the two smallest runs.
            per = (values[1] - values[0]) / (n[1] - n[0])
            fixed = values[0] - per * n[0]
            label = f"{fixed:.0f} MiB + {per * 1024:.1f} KiB per ServiceSet"
            axis.plot(n, [fixed + per * x for x in n], "--", color="grey", label=label)
        elif log:
            axis.plot(n, [values[0] * x / n[0] for x in n], "--", color="grey", label="linear from the first")
        if log:
            axis.set_yscale("log")
        else:
            axis.set_ylim(0, max(values) * 1.3)
        axis.set_xscale("log")
        axis.set_xlabel("ServiceSets (× 3 services)")
        axis.set_title(title, fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle("ksm-adapter on the simulated API server, 2 cores (docs/performance.md)", fontsize=11)
    figure.tight_layout()
    figure.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
