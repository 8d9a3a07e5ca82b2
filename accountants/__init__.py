"""dpaudit accountants: sound upper bounds on the privacy loss of DP-SGD.

>>> import accountants as acc
>>> spec = acc.DPSGD(noise_multiplier=1.1, sampling=acc.Poisson(rate=256 / 60_000), steps=14_062)
>>> bound = acc.epsilon(spec, delta=1e-5)          # EpsilonBound(value, bound="upper", ...)

``accountants.rdp`` and ``accountants.tradeoff`` are the subpackage and module; the functions are
:func:`rdp_curve` and :func:`tradeoff_curve`.
"""

from . import describe
from .accountant import Accountant, RDPAccountant
from .api import (
    calibrate,
    delta,
    epsilon,
    get_method,
    method_label,
    methods,
    poisson_epsilon,
    rdp_curve,
    register_method,
    shuffle_bounds,
    supports,
)
from .capacity import capacity_divergences, restricted_kl, restricted_renyi
from .comparison import compare, delta_divergence, symmetric_delta_divergence
from .errors import InputError, InputTypeError, UnsupportedError
from .events import DPSGD, Composed
from .mechanisms import Gaussian, Laplace, RandomizedResponse
from .orders import DEFAULT_ORDERS, default_orders
from .pld import pld_epsilon_bracket, pld_privacy_profile  # importing .pld registers method "pld"
from .rdp import OrderGridWarning
from .rdp.fixed_size import fixed_size_step_rdp, rdp_fswr_add_remove_lower
from .rdp.group import compare_group_bounds, rdp_poisson_gaussian_group, rdp_poisson_gaussian_group_baseline
from .reconstruction import rero_bound
from .results import DeltaBound, EpsilonBound
from .sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, Shuffle, TruncatedPoisson
from .shuffle import ShuffleBounds, shuffle_lower_epsilon
from .tradeoff import TradeOff, tradeoff_curve

__all__ = [
    "DEFAULT_ORDERS",
    "DPSGD",
    "Accountant",
    "Composed",
    "DeltaBound",
    "EpsilonBound",
    "FixedSize",
    "Gaussian",
    "InputError",
    "InputTypeError",
    "Laplace",
    "Neighbouring",
    "OrderGridWarning",
    "Poisson",
    "RDPAccountant",
    "RandomAllocation",
    "RandomizedResponse",
    "Shuffle",
    "ShuffleBounds",
    "TradeOff",
    "TruncatedPoisson",
    "UnsupportedError",
    "calibrate",
    "capacity_divergences",
    "compare",
    "compare_group_bounds",
    "default_orders",
    "delta",
    "delta_divergence",
    "describe",
    "epsilon",
    "fixed_size_step_rdp",
    "get_method",
    "method_label",
    "methods",
    "pld_epsilon_bracket",
    "pld_privacy_profile",
    "poisson_epsilon",
    "rdp_curve",
    "rdp_fswr_add_remove_lower",
    "rdp_poisson_gaussian_group",
    "rdp_poisson_gaussian_group_baseline",
    "register_method",
    "rero_bound",
    "restricted_kl",
    "restricted_renyi",
    "shuffle_bounds",
    "shuffle_lower_epsilon",
    "supports",
    "symmetric_delta_divergence",
    "tradeoff_curve",
]


def __getattr__(name: str):
    if name in ("restricted_lower_bound", "RestrictedLowerBound"):  # moved out of the theory package
        raise AttributeError(f"accountants.{name} moved to audit.capacity_estimate.{name} (an estimate from "
                             "samples is judgment, not theory)")
    raise AttributeError(f"module 'accountants' has no attribute {name!r}")
