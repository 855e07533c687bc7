"""The backend conformance suite on every backend of the ``memory`` fixture, and the
CI rule of conftest that turns server skips into failures."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Literal

import pytest

from memstrata.testing.conformance import BackendConformance

ROOT_CONFTEST = Path(__file__).parent.parent / "conftest.py"


class TestBackends(BackendConformance):
    """Every conformance test, on every backend of the ``memory`` fixture."""


@pytest.fixture
def kit(request: pytest.FixtureRequest) -> ModuleType:
    """The loaded top-level conftest (``import conftest`` could find tests/server's)."""
    for plugin in request.config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and getattr(plugin, "__file__", None) == str(
            ROOT_CONFTEST
        ):
            return plugin
    raise LookupError("the top-level conftest is not loaded")


def _skipped_report(
    reason: str, when: Literal["setup", "call", "teardown"] = "setup"
) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid="tests/test_x.py::test_x",
        location=("tests/test_x.py", 1, "test_x"),
        keywords={},
        outcome="skipped",
        longrepr=("tests/test_x.py", 1, f"Skipped: {reason}"),
        when=when,
    )


@pytest.mark.parametrize(
    ("reason", "ci", "fails"),
    [
        ("needs a PostgreSQL server: connection refused", "true", True),
        ("no Redis server on localhost:6379", "1", True),
        ("S3 (moto) could not start", "TRUE", True),
        ("needs a PostgreSQL server: connection refused", "", False),
        ("needs a PostgreSQL server: connection refused", "false", False),
        ("only runs on Windows", "true", False),
        ("numpy not installed", "true", False),
    ],
)
def test_server_skip_rule(kit: ModuleType, reason: str, ci: str, fails: bool) -> None:
    report = _skipped_report(reason)
    changed = kit.server_skip_to_failure(report, {"CI": ci})
    assert changed is fails
    assert report.outcome == ("failed" if fails else "skipped")
    if fails:
        assert reason in str(report.longrepr)


def test_server_skip_rule_leaves_passes_and_xfails_alone(kit: ModuleType) -> None:
    passed = pytest.TestReport("t", ("t", 1, "t"), {}, "passed", None, "call")
    assert kit.server_skip_to_failure(passed, {"CI": "true"}) is False
    assert passed.outcome == "passed"
    xfailed = _skipped_report("needs a redis server", "call")
    xfailed.wasxfail = "known"  # type: ignore[attr-defined]
    assert kit.server_skip_to_failure(xfailed, {"CI": "true"}) is False
    assert xfailed.outcome == "skipped"


def test_ci_enabled(kit: ModuleType) -> None:
    assert kit.ci_enabled({"CI": "true"})
    assert kit.ci_enabled({"CI": " True "})
    assert not kit.ci_enabled({})
    assert not kit.ci_enabled({"CI": "0"})


def test_hook_in_a_real_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the real conftest hook, in an inner pytest run, with and without CI."""
    pytester.makeconftest(ROOT_CONFTEST.read_text())
    pytester.makepyfile(
        test_inner="""
        import pytest

        def test_needs_server():
            pytest.skip("needs a PostgreSQL server: none found")

        @pytest.mark.skipif(True, reason="no redis server")
        def test_marked():
            pass

        def test_other_skip():
            pytest.skip("not on this platform")

        def test_ok():
            pass
        """
    )
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "dev")
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    # A skip in setup (a skipif mark, a fixture) fails as an error, one in the test as a failure.
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1)
    result.stdout.fnmatch_lines(["*CI=true: this test was skipped because a server is missing*"])
    monkeypatch.delenv("CI")
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=3)
