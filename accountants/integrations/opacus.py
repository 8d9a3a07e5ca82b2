"""An Opacus accountant backed by dpaudit: ``DpauditAccountant``.

Opacus' ``PrivacyEngine`` calls ``accountant.step(noise_multiplier=σ, sample_rate=q)`` after every
optimiser step and ``accountant.get_epsilon(delta)`` when asked. This class answers with dpaudit's
sound upper bounds (``method="rdp"`` or the certified ``"pld"``), for the sampling scheme declared
once at construction: Poisson (what Opacus' default loader draws), or fixed-size batches (with the
batch size and dataset size; every step's ``sample_rate`` must then equal ``batch_size/dataset_size``).

Opacus 1.6's ``PrivacyEngine(accountant=...)`` takes only a registered *name*. Two supported ways::

    engine = PrivacyEngine()
    engine.accountant = DpauditAccountant(method="pld")    # before make_private(...)

    register_with_opacus("dpaudit-pld", method="pld")      # once
    engine = PrivacyEngine(accountant="dpaudit-pld")

The history is kept in Opacus' own format, a list of ``(noise_multiplier, sample_rate, steps)``
(Opacus' ``get_noise_multiplier`` and checkpoints write it directly); heterogeneous steps compose.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from .. import api
from ..describe import from_dict, parse_sampling_kind, sampling_kind, to_dict
from ..errors import InputError, InputTypeError
from ..events import DPSGD, Composed
from ..results import EpsilonBound
from ..sampling import FixedSize, Neighbouring, Poisson, Shuffle
from ..shuffle import reduce_shuffle
from . import require_peer

__all__ = ["DpauditAccountant", "register_with_opacus"]

STATE_FORMAT = "dpaudit.opacus/1"


def _declared_sampling(sampling: str | FixedSize | Shuffle, batch_size: int | None,
                       dataset_size: int | None) -> FixedSize | Shuffle | None:
    """None for Poisson (the rate comes with every step), else the fixed-size or shuffle description."""
    if isinstance(sampling, (FixedSize, Shuffle)):
        if batch_size is not None or dataset_size is not None:
            raise InputError("give batch_size/dataset_size inside FixedSize(...) or with a sampling name, not both")
        return sampling
    if not isinstance(sampling, str):
        raise InputTypeError(
            "sampling must be 'poisson', 'fixed_wor', 'fixed_wr', 'shuffle' or an accountants.FixedSize/Shuffle; "
            f"got {type(sampling).__name__}"
        )
    kind = parse_sampling_kind(sampling)
    if kind == "poisson":
        if batch_size is not None or dataset_size is not None:
            raise InputError("sampling='poisson' takes no batch_size/dataset_size: Opacus passes the rate every step")
        return None
    if batch_size is None or dataset_size is None:
        raise InputError(f"sampling={sampling!r} needs batch_size and dataset_size")
    if kind == "shuffle":
        return Shuffle(batch_size, dataset_size)
    return FixedSize(batch_size, dataset_size, replace=kind == "fixed_wr")


class DpauditAccountant:
    """Opacus ``IAccountant`` answered by dpaudit's accountants.  Bound: upper.

    Args:
        method: a registered dpaudit method (``"rdp"`` or ``"pld"``; see :func:`accountants.methods`).
        sampling: ``"poisson"`` (default), ``"fixed_wor"``/``"fixed_wr"`` with ``batch_size`` and
            ``dataset_size``, ``"shuffle"`` (what Opacus' ``poisson_sampling=False`` loader does:
            reshuffle every epoch and iterate; accounted by its upper bound, docs/shuffle.md), or an
            :class:`accountants.FixedSize`/:class:`accountants.Shuffle`. Declared once: Opacus passes
            only a sample rate to :meth:`step`.
        neighbouring: ``"add_remove"`` (Opacus' guarantee) or ``"replace_one"``.
        group_size: K records protected together.

    Raises:
        InputError: for an unknown method or sampling, and in :meth:`step` for a sample rate that
            contradicts a fixed-size declaration.
    """

    _mechanism = "dpaudit"

    def __init__(self, method: str = "rdp", sampling: str | FixedSize | Shuffle = "poisson", *,
                 batch_size: int | None = None, dataset_size: int | None = None,
                 neighbouring: str | Neighbouring = "add_remove", group_size: int = 1) -> None:
        api.get_method(method)
        self.method = method
        self.fixed = _declared_sampling(sampling, batch_size, dataset_size)
        self.neighbouring = Neighbouring.parse(neighbouring)
        self.group_size = int(group_size)
        # Validate the declaration now (one step at a placeholder σ), not at the first query.
        self._part(1.0, self.fixed.rate if self.fixed is not None else 0.5, 1)
        self.history: list[tuple[float, float, int]] = []
        _register_virtual_subclass()

    # ------------------------------------------------------------------ Opacus' interface

    @classmethod
    def mechanism(cls) -> str:
        """The name this accountant answers to (Opacus compares it when loading a checkpoint)."""
        return cls._mechanism

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one optimiser step (run-length encoded, as Opacus does)."""
        self._part(noise_multiplier, sample_rate, 1)  # every check, before anything is recorded
        if self.history:
            s, q, t = self.history[-1]
            if s == noise_multiplier and q == sample_rate:
                self.history[-1] = (s, q, t + 1)
                return
        self.history.append((noise_multiplier, sample_rate, 1))

    def __len__(self) -> int:
        """Number of steps recorded."""
        return int(sum(t for _, _, t in self.history))

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """ε at δ for the steps so far (a float, as Opacus expects).  Bound: upper."""
        return float(self.epsilon_bound(delta).value)

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """The hook Opacus attaches to its ``DPOptimizer`` (same contract as Opacus' base class)."""

        def hook_fn(optim: Any) -> None:
            self.step(noise_multiplier=optim.noise_multiplier, sample_rate=sample_rate * optim.accumulated_iterations)

        return hook_fn

    def state_dict(self, destination: Any = None) -> Any:
        """Opacus' checkpoint entry (``history``, ``mechanism``) plus the dpaudit declaration."""
        if destination is None:
            destination = OrderedDict()
        destination["history"] = deepcopy(self.history)
        destination["mechanism"] = self.mechanism()
        destination["dpaudit"] = self._config()
        return destination

    def load_state_dict(self, state_dict: Any) -> None:
        """Load a :meth:`state_dict`; a different declaration (method, sampling, …) is refused."""
        if not state_dict:
            raise InputError("state_dict is empty; it cannot be loaded into the dpaudit accountant")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise InputError(f"state_dict has no {key!r} entry")
        if state_dict["mechanism"] != self.mechanism():
            raise InputError(f"state_dict is of mechanism {state_dict['mechanism']!r}, not {self.mechanism()!r}")
        config = state_dict.get("dpaudit")
        if config is not None and config != self._config():
            raise InputError(f"state_dict was written under {config}, this accountant declares {self._config()}")
        history = [(float(s), float(q), int(t)) for s, q, t in state_dict["history"]]
        for s, q, t in history:
            self._part(s, q, t)
        self.history = history

    # ------------------------------------------------------------------ dpaudit's view

    def epsilon_bound(self, delta: float) -> EpsilonBound:
        """The full :class:`accountants.EpsilonBound` (order, theorem, PLD bracket's lower end)."""
        if not self.history:
            return EpsilonBound(0.0, float(delta), method=self.method, theorem="no steps")
        return api.epsilon(self.spec(), delta, method=self.method)

    def spec(self) -> Composed:
        """The recorded training as a dpaudit description (one part per run of equal steps)."""
        return Composed(tuple(self._part(s, q, t) for s, q, t in self.history))

    def _part(self, noise_multiplier: float, sample_rate: float, steps: int) -> DPSGD:
        if self.fixed is None:
            sampling: Poisson | FixedSize | Shuffle = Poisson(sample_rate)
        else:
            sampling = self.fixed
            rates = [self.fixed.rate]
            if isinstance(self.fixed, Shuffle):  # Opacus passes 1/len(loader): ⌈n/b⌉ or ⌊n/b⌋ batches per epoch
                n, b = self.fixed.dataset_size, self.fixed.batch_size
                rates += [1 / -(-n // b), 1 / (n // b)]
            if not any(math.isclose(float(sample_rate), r, rel_tol=1e-9, abs_tol=0.0) for r in rates):
                raise InputError(
                    f"sample_rate must equal batch_size/dataset_size = {self.fixed.batch_size}/"
                    f"{self.fixed.dataset_size} = {self.fixed.rate:.10g} under the declared fixed-size sampling; "
                    f"got {sample_rate!r} (the batch size or dataset size changed, or the loader's batches do "
                    f"not divide the dataset: declare what is actually sampled)"
                )
        part = DPSGD(noise_multiplier, sampling, steps, self.neighbouring, self.group_size)
        reason = api.get_method(self.method).unsupported(reduce_shuffle(part))
        if reason is not None:
            raise api.UnsupportedError(reason)
        return part

    def _config(self) -> dict[str, Any]:
        sampling = {"kind": "poisson"} if self.fixed is None else to_dict(self.fixed)
        return {"format": STATE_FORMAT, "method": self.method, "sampling": sampling,
                "neighbouring": self.neighbouring.value, "group_size": self.group_size}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DpauditAccountant:
        """An empty accountant with the declaration of ``state_dict()["dpaudit"]``."""
        if config.get("format") != STATE_FORMAT:
            raise InputError(f"config format must be {STATE_FORMAT!r}; got {config.get('format')!r}")
        s = config["sampling"]
        sampling: str | FixedSize | Shuffle = (
            "poisson" if s.get("kind") == "poisson" else from_dict(s, where="sampling")
        )
        return cls(config["method"], sampling, neighbouring=config["neighbouring"], group_size=config["group_size"])

    def __repr__(self) -> str:
        sampling = "poisson" if self.fixed is None else sampling_kind(self.fixed)
        return (f"DpauditAccountant(method={self.method!r}, sampling={sampling!r}, "
                f"neighbouring={self.neighbouring.value!r}, steps={len(self)})")


_REGISTERED = False


def _register_virtual_subclass() -> None:
    """Make ``isinstance(acct, opacus.accountants.IAccountant)`` true when Opacus is installed."""
    global _REGISTERED
    if _REGISTERED:
        return
    try:
        from opacus.accountants import IAccountant
    except ImportError:  # the accountant works without Opacus; only PrivacyEngine needs it
        return
    IAccountant.register(DpauditAccountant)
    _REGISTERED = True


def register_with_opacus(name: str = "dpaudit", *, force: bool = False, **config: Any) -> type[DpauditAccountant]:
    """Register a configured accountant class in Opacus' registry, so ``PrivacyEngine(accountant=name)`` works.

    ``config`` is passed to :class:`DpauditAccountant` (method, sampling, batch_size, …) each time
    Opacus builds one (``PrivacyEngine`` and ``get_noise_multiplier`` call the class with no arguments).

    Raises:
        PeerMissingError: Opacus is not installed (names the ``peers`` extra).
    """
    registry = require_peer("opacus.accountants", for_what="register_with_opacus")
    DpauditAccountant(**config)  # validate the configuration once, now

    def __init__(self: DpauditAccountant) -> None:
        DpauditAccountant.__init__(self, **config)

    cls = type(f"DpauditAccountant_{name.replace('-', '_')}", (DpauditAccountant,),
               {"__init__": __init__, "_mechanism": name, "__module__": __name__})
    registry.register_accountant(name, cls, force=force)
    return cls
