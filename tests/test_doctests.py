"""The examples in mas's docstrings run as they read (``>>>`` lines, checked by doctest)."""

import doctest
import importlib
import pkgutil

import pytest

import mas


def _with_examples() -> list[str]:
    names = sorted(m.name for m in pkgutil.walk_packages(mas.__path__, "mas.") if not m.name.endswith("__main__"))
    finder = doctest.DocTestFinder()
    return [n for n in names if any(test.examples for test in finder.find(importlib.import_module(n)))]


@pytest.mark.parametrize("name", _with_examples())
def test_the_examples_of_each_module_hold(name):
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    failed, tried = doctest.testmod(importlib.import_module(name), optionflags=flags)
    assert failed == 0, f"{failed} of {tried} examples of {name} failed (printed above)"
