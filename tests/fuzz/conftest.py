"""Fixtures shared by the fuzz tests."""
from __future__ import annotations

import pytest

from helpers import peak_rss_kb, reset_peak_rss, status_kb

MEMORY_BUDGET_KB = 500 * 1024  # peak RSS growth allowed across one test


@pytest.fixture
def memory_guard():
    """Fail a test whose inputs made the process's peak RSS grow by more than the budget: a length
    field that claims 2^62 bytes must be an error, not an allocation. The peak is reset first
    (where the kernel allows), so an earlier test's peak cannot hide this test's growth."""
    before = status_kb("VmRSS") if reset_peak_rss() else peak_rss_kb()
    yield
    after = peak_rss_kb()
    assert after - before < MEMORY_BUDGET_KB, f"peak RSS grew by {(after - before) // 1024} MB"
