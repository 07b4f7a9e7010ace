"""The suite-wide hooks of tests/conftest.py: the root marker skips, the environment is clean."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT_SKIP_REASON, SCRUBBED_PREFIXES

INNER_INI = """
[pytest]
addopts = --strict-markers -ra
asyncio_default_fixture_loop_scope = function
markers =
    root: needs root
"""
INNER_TESTS = """
import pytest

@pytest.mark.root
def test_marked():
    pass

def test_unmarked():
    pass
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytest run that loads this suite's hooks."""
    pytester.makeini(INNER_INI)
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems\n")
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester


def test_a_root_test_is_skipped_with_the_reason_when_not_root(
    inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = inner.runpytest_inprocess()
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([f"SKIPPED*test_inner.py*{ROOT_SKIP_REASON}*"])


def test_a_root_test_runs_as_root(inner: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    inner.runpytest_inprocess().assert_outcomes(passed=2)


@pytest.mark.parametrize("prefix", SCRUBBED_PREFIXES)
def test_no_setting_or_credential_reaches_a_test_or_its_subprocesses(prefix: str) -> None:
    assert not [name for name in os.environ if name.startswith(prefix)]
    child = subprocess.run(
        [sys.executable, "-c", "import os; print('\\n'.join(os.environ))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert not [name for name in child.stdout.split() if name.startswith(prefix)]
