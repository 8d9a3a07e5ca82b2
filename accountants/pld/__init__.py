"""Privacy-loss-distribution (PLD) accounting in torch with a certified bracket.

Public entry points:

* :func:`pld_epsilon_bracket` (spec, δ) → :class:`PLDBracket` (lower ≤ ε(δ) ≤ upper);
* :func:`pld_delta_bracket` (spec, ε) → :class:`PLDBracket` on δ(ε);
* :func:`pld_privacy_profile` (spec, eps_grid) → sound UPPER δ(ε) on a grid (max over the add and
  remove directions), on the device of ``eps_grid`` — the input for trade-off curves;
* :func:`pld_directional_profiles` (spec, eps_grid) → the same per ordered direction (not maximised), and
  :func:`directional_tradeoff_curves` (spec) → each direction's lower trade-off curve;
* :func:`pld_profile` (spec, h=, delta_error=) → :class:`PLDProfile`, one composition that answers
  many queries (``delta_upper/lower(eps)``, ``epsilon_upper/lower(delta)``);
* :class:`PLDMethod`, registered as ``"pld"`` in :mod:`accountants.api`, so that
  ``accountants.epsilon(spec, 1e-5, method="pld")`` returns ``EpsilonBound(value=upper, lower=...)``.

Pipeline: :mod:`.pairs` (one dominating pair per ordered direction, ``docs/dominating-pairs.md``)
→ :mod:`.discretise` (exact bin masses under P and Q on the lattice {k·h}; a connect-the-dots
PMF that dominates the step, and the PMFs of an explicit test statistic under P and Q)
→ :mod:`.compose` (one batched float64 real FFT per direction, Chernoff window; upper bound from
the pessimistic PMF, lower bound from the best threshold test; both off by O(T·h²)).
Device and dtype follow the inputs (``device=`` or ``eps_grid.device``).

Certificate: every term of the bracket is proved, the float64 FFT round-off included (an a-priori
bound from Higham 2002 Thm 24.2, :func:`.compose.fft_compose`); the one modelling assumption is
that torch's FFT obeys that standard stage-wise error bound. Runs whose steps are all unsubsampled
Gaussians are composed exactly as μ-GDP (:mod:`.gaussian`). :class:`PLDMethod` reports as its
upper end the smaller of the PLD upper end and the RDP bound (``upper_source="rdp"`` when that is
the RDP bound). Work is capped (``MAX_STEP_POINTS`` per step, ``MAX_POINTS`` per FFT): beyond the
caps the lattice is coarsened (wider bracket, still sound) or ``UnsupportedError`` names the limit.

>>> import accountants as acc
>>> spec = acc.DPSGD(1.1, acc.Poisson(256 / 60_000), steps=14_062)
>>> b = acc.epsilon(spec, 1e-5, method="pld")
>>> b.lower <= 2.3816 <= b.value
True
"""

from .accountant import (
    PLDBracket,
    PLDMethod,
    PLDProfile,
    directional_tradeoff_curves,
    pld_delta_bracket,
    pld_directional_profiles,
    pld_epsilon_bracket,
    pld_privacy_profile,
    pld_profile,
)
from .compose import ComposedPLD, compose
from .discretise import DiscreteStep, discretise
from .gaussian import gdp_delta_bracket, gdp_epsilon_bracket
from .pairs import (
    GaussianShift,
    MixturePair,
    PoissonAdd,
    PoissonGroupAdd,
    PoissonGroupRemove,
    PoissonRemove,
    PoissonReplace,
    step_pairs,
)

__all__ = [
    "ComposedPLD",
    "DiscreteStep",
    "GaussianShift",
    "MixturePair",
    "PLDBracket",
    "PLDMethod",
    "PLDProfile",
    "PoissonAdd",
    "PoissonGroupAdd",
    "PoissonGroupRemove",
    "PoissonRemove",
    "PoissonReplace",
    "compose",
    "directional_tradeoff_curves",
    "discretise",
    "gdp_delta_bracket",
    "gdp_epsilon_bracket",
    "pld_delta_bracket",
    "pld_directional_profiles",
    "pld_epsilon_bracket",
    "pld_privacy_profile",
    "pld_profile",
    "step_pairs",
]

from ..api import register_method as _register_method

_register_method(PLDMethod())
