"""Accountant kernels keep their work on the inputs' device: no hidden ``.cpu()`` in a hot path.

No GPU is lent to this project's CI, so the check is the one that can fail on CPU: a
``TorchFunctionMode`` sees every tensor method call of the kernel and records (1) every call that
would move an array to the host on a GPU (``Tensor.cpu``, ``.numpy``, ``__array__``, ``.to`` another
device), which must not happen at all, and (2) every scalar read (``.item``, ``.tolist``,
``float(t)``, ``bool(t)``: a host synchronisation on a GPU), whose count must not grow with the
number of orders (reads for loop bounds are fine; per-element reads would scale).
"""

import collections

import pytest
import torch
from torch.overrides import TorchFunctionMode

import accountants as acc
from accountants.pld.accountant import pld_profile
from accountants.rdp.fixed_size import fixed_size_step_rdp
from accountants.rdp.poisson import rdp_poisson_gaussian

_MOVES = {"cpu", "numpy", "__array__"}
_READS = {"item", "tolist", "__float__", "__int__", "__bool__", "__index__"}


class _Transfers(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.moves: list[str] = []
        self.reads: collections.Counter = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _MOVES:
            self.moves.append(name)
        elif name in _READS:
            self.reads[name] += 1
        elif name == "to" and args and isinstance(args[0], torch.Tensor):
            target = kwargs.get("device")
            for a in args[1:]:
                if isinstance(a, (str, torch.device)):
                    target = a
                elif isinstance(a, torch.Tensor):
                    target = a.device
            if target is not None and torch.device(target) != args[0].device:
                self.moves.append(f"to({target})")
        return func(*args, **kwargs)


def _orders(n: int, dtype=torch.float64) -> torch.Tensor:
    base = torch.tensor([1.5, 2.0, 3.0, 4.5, 8.0, 16.0, 32.0, 64.0], dtype=dtype)
    return base.repeat(n // base.numel())  # same distinct orders: the same loop bounds at every n


def _kernels():
    return {
        "poisson_rdp": lambda a: rdp_poisson_gaussian(a, 0.01, 1.1),
        "fixed_size_rdp": lambda a: fixed_size_step_rdp(a, 1.1, 64, 10_000).rdp,
    }


@pytest.mark.parametrize("kernel", ["poisson_rdp", "fixed_size_rdp"])
def test_rdp_kernels_move_no_array_and_read_no_element(kernel):
    fn = _kernels()[kernel]
    reads = []
    for n in (8, 64):
        with _Transfers() as t:
            out = fn(_orders(n))
        assert t.moves == [], f"{kernel}: arrays moved off the input's device: {t.moves}"
        assert out.shape == (n,) and out.device == torch.device("cpu") and out.dtype == torch.float64
        reads.append(t.reads)
    assert reads[0] == reads[1], f"{kernel}: scalar reads grow with the number of orders: {reads}"


@pytest.mark.parametrize("kernel", ["poisson_rdp", "fixed_size_rdp"])
def test_rdp_kernels_follow_the_input_dtype(kernel):
    out = _kernels()[kernel](_orders(8, torch.float32))
    assert out.dtype == torch.float32


def test_pld_profile_moves_no_array():
    spec = acc.DPSGD(1.0, acc.Poisson(0.01), steps=100)
    with _Transfers() as t:
        pld_profile(spec, h=1e-3, device="cpu")
    assert t.moves == [], f"pld: arrays moved off the compute device: {t.moves}"


def test_the_check_sees_a_hidden_cpu_call():
    """The detector itself: a kernel with a hidden ``.cpu()`` / ``.numpy()`` is caught."""
    with _Transfers() as t:
        x = _orders(8)
        x.cpu().numpy()
        x.to("meta")
    assert t.moves == ["cpu", "numpy", "to(meta)"]
