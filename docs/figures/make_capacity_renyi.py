"""Restricted vs unrestricted Rényi divergence against the order α (Chaudhuri et al. 2019 Figs 1-2, corrected).

Run from the repository root:  python docs/figures/make_capacity_renyi.py
Writes docs/figures/capacity_renyi.png. Top row: the paper's settings (Laplace ε = 1, Gaussian σ = 1).
Bottom row: noisier mechanisms (Laplace b = 4, Gaussian σ = 4) where the paper's printed (lin, Rényi)
"upper bound" falls below the exact restricted value, i.e. is not a bound.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import accountants as acc
from accountants import capacity as cap

OUT = Path(__file__).with_name("capacity_renyi.png")


def panel(ax, mech, title: str, log_y: bool) -> None:
    orders = torch.cat([torch.linspace(1.05, 2.0, 12), torch.linspace(2.1, 12.0, 34)]).to(torch.float64)
    res = cap.capacity_divergences(mech, ["linear", "poly2", "poly3"], "renyi", orders)
    a = orders.numpy()
    ax.plot(a, res.unrestricted.numpy(), color="black", lw=2, label="unrestricted Rényi (RDP)")
    for name, color in (("poly3", "tab:purple"), ("poly2", "tab:blue"), ("linear", "tab:green")):
        label = "restricted, linear (affine)" if name == "linear" else f"restricted, degree ≤ {name[-1]}"
        ax.plot(a, res.restricted[name].numpy(), color=color, lw=1.8, label=label)
    claimed = cap.paper_claimed_lin_renyi_bound(mech, orders)
    ax.plot(a, claimed.numpy(), color="tab:red", ls="--", lw=1.4, label="paper's printed linear 'bound' (invalid)")
    bad = (claimed < res.restricted["linear"]).numpy()
    if bad.any():
        ax.fill_between(a, 0, 1, where=bad, transform=ax.get_xaxis_transform(), color="tab:red", alpha=0.08,
                        label="printed bound < exact value")
    ax.set_title(title)
    ax.set_xlabel("order α")
    ax.set_ylabel("divergence (nats)")
    if log_y:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, float(res.unrestricted.max()) * 1.05)
    ax.grid(alpha=0.3)


def main() -> None:
    torch.set_num_threads(1)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), constrained_layout=True)
    panel(axes[0, 0], acc.Laplace(1.0), "Laplace, b = 1 (ε = 1): paper Fig. 1", log_y=False)
    panel(axes[0, 1], acc.Gaussian(1.0), "Gaussian, σ = 1: paper Fig. 2", log_y=False)
    panel(axes[1, 0], acc.Laplace(4.0), "Laplace, b = 4 (ε = 0.25)", log_y=True)
    panel(axes[1, 1], acc.Gaussian(4.0), "Gaussian, σ = 4", log_y=True)
    handles, labels = axes[1, 1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9)
    fig.suptitle("Restricted (capacity-bounded) vs unrestricted Rényi divergence, sensitivity 1\n"
                 "restricted values are not (ε, δ) and not a trade-off curve", fontsize=11)
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
