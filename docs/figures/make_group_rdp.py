"""Regenerate docs/figures/group_rdp.png: tight vs baseline group RDP against the order α.

Run from the repository root:  python docs/figures/make_group_rdp.py

Tight: Schuchardt et al. 2024 Thm 4.2 (group of K records inserted or removed, Poisson-subsampled
Gaussian). Baseline: the Hölder recursion (Mironov 2017 Prop. 11, p = 2) on the exact single-record
Poisson RDP, made monotone in α (running minimum from the right). K = 1: both are the exact
single-record curve.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

from accountants.rdp.group import rdp_poisson_gaussian_group, rdp_poisson_gaussian_group_baseline

SIGMA = 1.0
RATES = (0.001, 0.1)
GROUP_SIZES = (1, 2, 4, 8)
OUT = Path(__file__).resolve().parent / "group_rdp.png"


def main() -> None:
    torch.set_num_threads(1)
    orders = torch.logspace(torch.log10(torch.tensor(1.02)), 2, 160, dtype=torch.float64)
    fig, axes = plt.subplots(1, len(RATES), figsize=(11, 4.2), sharey=False)
    colors = dict(zip(GROUP_SIZES, ("black", "tab:blue", "tab:orange", "tab:red"), strict=True))
    for ax, r in zip(axes, RATES, strict=True):
        for K in GROUP_SIZES:
            tight = rdp_poisson_gaussian_group(orders, r, SIGMA, K)
            ax.plot(orders, tight, color=colors[K], lw=1.8, label=f"K={K} tight (Thm 4.2)")
            if K > 1:
                base = rdp_poisson_gaussian_group_baseline(orders, r, SIGMA, K, monotone=True)
                ax.plot(orders, base, color=colors[K], lw=1.2, ls="--", label=f"K={K} baseline (Hölder rec.)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("RDP order α")
        ax.set_ylabel("one-step RDP ε(α)")
        ax.set_title(f"Poisson rate r = {r:g}, noise multiplier σ = {SIGMA:g}")
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7, ncol=2, loc="lower right")  # the empty corner
    fig.suptitle("Group privacy of the Poisson-subsampled Gaussian: tight (solid) vs baseline (dashed)")
    fig.tight_layout()
    fig.savefig(OUT, dpi=130)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
