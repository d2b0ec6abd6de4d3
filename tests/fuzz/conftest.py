"""Fixtures shared by the fuzz tests."""
from __future__ import annotations

import resource

import pytest

MEMORY_BUDGET_KB = 500 * 1024  # peak RSS growth allowed across one test


@pytest.fixture
def memory_guard():
    """Fail a test whose inputs made the process's peak RSS grow by more than the budget: a length
    field that claims 2^62 bytes must be an error, not an allocation."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < MEMORY_BUDGET_KB, f"peak RSS grew by {(after - before) // 1024} MB"
