"""Shared small fixtures for the attacks tests (kept tiny: the whole folder runs in well under 90 s)."""

import pytest

from attacks import data


@pytest.fixture(scope="session")
def digits():
    """The standardised digits data (1,797 × 64)."""
    return data.digits()


@pytest.fixture(scope="session")
def digits100(digits):
    """The first 100 digits: small enough for many runs per test."""
    return digits.subset(slice(0, 100))
