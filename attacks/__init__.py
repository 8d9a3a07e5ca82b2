"""dpaudit attacks: DP-SGD training with canaries, and membership-inference and reconstruction games.

Modules (the public API is what each lists in ``__all__``):

- :mod:`attacks.data` — embedded datasets (digits, breast cancer, Gaussian classes).
- :mod:`attacks.models` — logistic regression, MLP, small CNN; stacked parameters for R models.
- :mod:`attacks.samplers` — Poisson, fixed-size with and without replacement (``spec.sampling``).
- :mod:`attacks.dpsgd` — ``train(spec, model, data, ...)``: DP-SGD for R models at once.
- :mod:`attacks.canaries` — gradient (Dirac) and input-space canaries, seeded inclusion.
- :mod:`attacks.threat` — ``WhiteBox()`` | ``BlackBox()``.
- :mod:`attacks.membership` — scores (higher ⇒ member): ``LikelihoodRatio() | InnerProductSum() |
  LossScore() | ConfidenceScore() | LiRA(n_shadow, online, fixed_variance)``.
- :mod:`attacks.reconstruction` — informed-adversary reconstructors.
- :mod:`attacks.faults` — deliberately broken DP-SGD variants.
- :mod:`attacks.games` — ``multi_run_game``, ``one_run_game``, ``reconstruction_game`` →
  ``AttackOutcome``; resumable through ``run_dir/trials.jsonl``.
"""

from . import canaries, data, dpsgd, faults, games, membership, models, reconstruction, samplers, threat
from .games import AttackOutcome, Design, Setup, multi_run_game, one_run_game, reconstruction_game

__all__ = [
    "AttackOutcome",
    "Design",
    "Setup",
    "canaries",
    "data",
    "dpsgd",
    "faults",
    "games",
    "membership",
    "models",
    "multi_run_game",
    "one_run_game",
    "reconstruction",
    "reconstruction_game",
    "samplers",
    "threat",
]
