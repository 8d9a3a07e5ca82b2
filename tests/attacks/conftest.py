"""Shared small fixtures for the attacks tests (kept tiny: the whole folder runs in well under 90 s)."""

import pytest
import torch

from attacks import data


@pytest.fixture(scope="package", autouse=True)
def _one_thread():
    """One intra-op thread: these tensors are small, and on a shared 2-core machine two spinning
    threads per process made steps ~10x slower; the previous setting is restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def digits():
    """The standardised digits data (1,797 × 64)."""
    return data.digits()


@pytest.fixture(scope="session")
def digits100(digits):
    """The first 100 digits: small enough for many runs per test."""
    return digits.subset(slice(0, 100))
