"""Threat models: what the adversary sees of a training run.

- :class:`WhiteBox`: every privatised update u_t (as the standard DP-SGD analysis allows, and
  as federated learning exposes). Scores read the projections of the updates on the canary
  directions (``TrainResult.observations``) and the update norms. ``WhiteBox(crafted_dataset=True)``
  ("white box, crafted dataset") also lets the adversary choose the gradient of every record of
  the training set, not only the canary's: the worst-case instantiations of
  :class:`attacks.canaries.CraftedDataset` (docs/worst-case.md) need it.
- :class:`HiddenState`: the final parameters θ_T only (the hidden-state threat model of Cebere et
  al., ICLR 2025, and Annamalai & De Cristofaro, NeurIPS 2024), with θ_0 known (the adversary may
  choose the initialisation). Scores read ⟨θ_0 − θ_T, v⟩ for the canary direction v; the intermediate
  updates are hidden. A gradient canary's gradient is the same at every step (docs/worst-case.md).
- :class:`BlackBox`: the final model only; scores read its outputs on chosen inputs, in eval mode.

A white-box adversary can compute every hidden-state score (θ_T = θ_0 − η Σ_t u_t), and a
hidden-state adversary every black-box score (it holds the final model); :func:`allows` states
that order.

>>> allows(WhiteBox(), BlackBox()), allows(BlackBox(), WhiteBox())
(True, False)
>>> allows(HiddenState(), BlackBox()), allows(HiddenState(), WhiteBox()), allows(WhiteBox(), HiddenState())
(True, False, True)
>>> describe(WhiteBox(crafted_dataset=True))
'white_box_crafted_dataset'

"""

from __future__ import annotations

from dataclasses import dataclass

from accountants.errors import InputTypeError

__all__ = ["BlackBox", "HiddenState", "Threat", "WhiteBox", "allows", "describe"]


@dataclass(frozen=True, slots=True)
class WhiteBox:
    """The adversary sees every privatised update u_1, …, u_T (and the final model).

    Attributes:
        crafted_dataset: the adversary also chooses every record's gradient ("white box,
            crafted dataset"; Nasr et al. 2023's strongest setting), not only the canary's.
    """

    crafted_dataset: bool = False


@dataclass(frozen=True, slots=True)
class BlackBox:
    """The adversary sees the final model only (its outputs on inputs it chooses)."""


@dataclass(frozen=True, slots=True)
class HiddenState:
    """The adversary sees the final parameters θ_T only, and knows θ_0 (hidden-state threat model)."""


Threat = WhiteBox | HiddenState | BlackBox

_RANK = {WhiteBox: 2, HiddenState: 1, BlackBox: 0}  # each view can compute everything a lower one can


def allows(threat: Threat, needed: Threat) -> bool:
    """Whether an adversary with view ``threat`` can run an attack that needs view ``needed``."""
    if type(threat) not in _RANK or type(needed) not in _RANK:
        raise InputTypeError(f"threat must be WhiteBox(), HiddenState() or BlackBox(); got {threat!r}, {needed!r}")
    return _RANK[type(threat)] >= _RANK[type(needed)]


def describe(threat: Threat) -> str:
    """ "white_box", "white_box_crafted_dataset", "hidden_state" or "black_box"."""
    match threat:
        case WhiteBox(crafted_dataset=True):
            return "white_box_crafted_dataset"
        case WhiteBox():
            return "white_box"
        case HiddenState():
            return "hidden_state"
        case BlackBox():
            return "black_box"
        case _:
            raise InputTypeError(f"threat must be WhiteBox(), HiddenState() or BlackBox(); got {threat!r}")
