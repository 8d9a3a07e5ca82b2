"""Threat models: what the adversary sees of a training run.

- :class:`WhiteBox`: every privatised update u_t (as the standard DP-SGD analysis allows, and
  as federated learning exposes). Scores read the projections of the updates on the canary
  directions (``TrainResult.observations``) and the update norms.
- :class:`BlackBox`: the final model only; scores read its outputs on chosen inputs, in eval mode.

A white-box adversary can compute every black-box score too (the final model is θ_T);
:func:`allows` states that order.

>>> allows(WhiteBox(), BlackBox()), allows(BlackBox(), WhiteBox())
(True, False)
"""

from __future__ import annotations

from dataclasses import dataclass

from accountants._validate import InputTypeError

__all__ = ["BlackBox", "Threat", "WhiteBox", "allows", "describe"]


@dataclass(frozen=True, slots=True)
class WhiteBox:
    """The adversary sees every privatised update u_1, …, u_T (and the final model)."""


@dataclass(frozen=True, slots=True)
class BlackBox:
    """The adversary sees the final model only (its outputs on inputs it chooses)."""


Threat = WhiteBox | BlackBox


def allows(threat: Threat, needed: Threat) -> bool:
    """Whether an adversary with view ``threat`` can run an attack that needs view ``needed``."""
    match threat, needed:
        case WhiteBox(), _:
            return True
        case BlackBox(), BlackBox():
            return True
        case BlackBox(), WhiteBox():
            return False
        case _:
            raise InputTypeError(f"threat must be WhiteBox() or BlackBox(); got {threat!r}, {needed!r}")


def describe(threat: Threat) -> str:
    """ "white_box" or "black_box"."""
    match threat:
        case WhiteBox():
            return "white_box"
        case BlackBox():
            return "black_box"
        case _:
            raise InputTypeError(f"threat must be WhiteBox() or BlackBox(); got {threat!r}")
