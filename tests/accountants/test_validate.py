"""Validators name the parameter, the allowed range, the value, and for tensors where it failed."""

import math

import pytest
import torch

from accountants import validate as check


def test_scalar_message_names_parameter_and_range():
    with pytest.raises(ValueError, match=r"^q must be in \(0, 1\]; got 1.3$"):
        check.in_range(0.0, 1.0, closed="right", q=1.3)


def test_tensor_message_counts_and_indexes():
    q = torch.full((64,), 0.5)
    q[7] = 1.3
    q[9] = 2.0
    q[20] = -1.0
    with pytest.raises(
        ValueError, match=r"q must be in \(0, 1\]; got 1.3 \(3 of 64 entries out of range, first at index 7\)"
    ):
        check.in_range(0.0, 1.0, closed="right", q=q)


def test_nan_always_fails():
    with pytest.raises(ValueError, match="sigma"):
        check.positive(sigma=math.nan)
    with pytest.raises(ValueError, match="delta"):
        check.in_range(0.0, 1.0, closed="neither", delta=float("nan"))


def test_types():
    with pytest.raises(TypeError, match="sigma"):
        check.positive(sigma="1.0x")
    with pytest.raises(TypeError, match="steps"):
        check.integer(1, None, steps=2.5)
    with pytest.raises(TypeError, match="flag"):
        check.positive(flag=True)


def test_integer_range():
    check.integer(1, None, steps=3)
    with pytest.raises(ValueError, match=r"steps must be in \[1, inf\]; got 0"):
        check.integer(1, None, steps=0)
