"""Run the doctest examples of every module in the three packages (the README's test command
collects only tests/, so the examples in docstrings are exercised here)."""

import doctest
import importlib
import pkgutil

import pytest

import accountants
import attacks
import audit


def _modules():
    for pkg in (accountants, attacks, audit):
        yield pkg.__name__
        for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            yield info.name


def _has_examples(name: str) -> bool:
    return any(t.examples for t in doctest.DocTestFinder().find(importlib.import_module(name)))


WITH_EXAMPLES = [m for m in _modules() if _has_examples(m)]


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_module_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"


def test_examples_exist():
    # Guards against the collection above silently finding nothing.
    assert len(WITH_EXAMPLES) >= 3
