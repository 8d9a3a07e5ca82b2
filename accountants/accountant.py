"""A stateful accountant for heterogeneous training: a thin shell over the pure functions.

Opacus-like usage::

    acct = RDPAccountant()
    acct.step(noise_multiplier=1.0, sampling=Poisson(0.01), steps=500)
    acct.step(noise_multiplier=0.8, sampling=Poisson(0.02), steps=100)
    acct.epsilon(delta=1e-5)   # EpsilonBound, upper

Queries have no side effects; the history is run-length encoded and serialisable as JSON.
"""

from __future__ import annotations

from typing import Any

from . import api
from .errors import InputError
from .events import DPSGD, Composed
from .results import DeltaBound, EpsilonBound
from .sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, Shuffle, TruncatedPoisson

__all__ = ["Accountant", "RDPAccountant"]


class Accountant:
    """Records DP-SGD phases and answers ε/δ queries through a registered method."""

    method: str = "rdp"

    def __init__(
        self,
        neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
        group_size: int = 1,
        method: str | None = None,
    ) -> None:
        self.neighbouring = Neighbouring.parse(neighbouring)
        self.group_size = int(group_size)
        if method is not None:
            self.method = method
        api.get_method(self.method)  # fail early on an unknown method
        self._history: list[DPSGD] = []

    def step(
        self,
        *,
        noise_multiplier: float,
        sampling: Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson | None = None,
        sample_rate: float | None = None,
        steps: int = 1,
    ) -> Accountant:
        """Record ``steps`` steps; give ``sampling`` or (Opacus-style) ``sample_rate`` for Poisson.

        Raises:
            ValueError: for bad parameters, or a phase no theorem covers (checked now, not
                at query time).
        """
        if (sampling is None) == (sample_rate is None):
            raise InputError("give exactly one of sampling= or sample_rate=")
        if sampling is None:
            sampling = Poisson(sample_rate)  # type: ignore[arg-type]
        part = DPSGD(noise_multiplier, sampling, steps, self.neighbouring, self.group_size)
        reason = api.get_method(self.method).unsupported(part)
        if reason is not None:
            raise api.UnsupportedError(reason)
        last = self._history[-1] if self._history else None
        if last is not None and last.noise_multiplier == part.noise_multiplier and last.sampling == part.sampling:
            self._history[-1] = last.with_steps(last.steps + part.steps)
        else:
            self._history.append(part)
        return self

    @property
    def history(self) -> tuple[DPSGD, ...]:
        """The recorded phases, run-length encoded (read-only)."""
        return tuple(self._history)

    @property
    def steps(self) -> int:
        """Total number of recorded steps."""
        return sum(p.steps for p in self._history)

    def __len__(self) -> int:
        """Number of recorded steps (not phases)."""
        return self.steps

    def spec(self) -> Composed:
        """The recorded training as a :class:`Composed` description."""
        return Composed(tuple(self._history))

    def epsilon(self, delta: float) -> EpsilonBound:
        """ε at δ for everything recorded so far.  Bound: upper. No side effects."""
        return api.epsilon(self.spec(), delta, method=self.method)

    def delta(self, epsilon: float) -> DeltaBound:
        """δ at ε for everything recorded so far.  Bound: upper. No side effects."""
        return api.delta(self.spec(), epsilon, method=self.method)

    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state (no pickle)."""

        def enc(p: DPSGD) -> dict[str, Any]:
            s = p.sampling
            if isinstance(s, TruncatedPoisson):
                sd: dict[str, Any] = {"kind": "truncated_poisson", "rate": s.rate, "max_batch_size": s.max_batch_size,
                                      "dataset_size": s.dataset_size}
            elif isinstance(s, Poisson):
                sd = {"kind": "poisson", "rate": s.rate}
            elif isinstance(s, Shuffle):
                sd = {"kind": "shuffle", "batch_size": s.batch_size, "dataset_size": s.dataset_size}
            elif isinstance(s, RandomAllocation):
                sd = {"kind": "random_allocation", "k": s.k, "steps_per_epoch": s.steps_per_epoch}
            else:
                sd = {"kind": "fixed", "batch_size": s.batch_size, "dataset_size": s.dataset_size, "replace": s.replace}
            return {"noise_multiplier": p.noise_multiplier, "sampling": sd, "steps": p.steps}

        return {
            "format": "dpaudit.accountant/1",
            "method": self.method,
            "neighbouring": self.neighbouring.value,
            "group_size": self.group_size,
            "history": [enc(p) for p in self._history],
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Accountant:
        """Rebuild an accountant from :meth:`state_dict` output."""
        if state.get("format") != "dpaudit.accountant/1":
            raise InputError(f"state format must be 'dpaudit.accountant/1'; got {state.get('format')!r}")
        acct = cls(state["neighbouring"], state["group_size"], state["method"])
        for h in state["history"]:
            sd = h["sampling"]
            if sd["kind"] == "poisson":
                sampling: Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson = Poisson(sd["rate"])
            elif sd["kind"] == "fixed":
                sampling = FixedSize(sd["batch_size"], sd["dataset_size"], sd["replace"])
            elif sd["kind"] == "shuffle":
                sampling = Shuffle(sd["batch_size"], sd["dataset_size"])
            elif sd["kind"] == "random_allocation":
                sampling = RandomAllocation(sd["k"], sd["steps_per_epoch"])
            elif sd["kind"] == "truncated_poisson":
                sampling = TruncatedPoisson(sd["rate"], sd["max_batch_size"], sd["dataset_size"])
            else:
                raise InputError("sampling kind must be 'poisson', 'fixed', 'shuffle', 'random_allocation' or "
                                 f"'truncated_poisson'; got {sd['kind']!r}")
            acct.step(noise_multiplier=h["noise_multiplier"], sampling=sampling, steps=h["steps"])
        return acct


class RDPAccountant(Accountant):
    """The stateful RDP accountant."""

    method = "rdp"
