"""The scripted agents of tests/fakes: every name a test asks for exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.fakes.scenarios import SCENARIOS

TESTS = Path(__file__).resolve().parents[1]
AGENT = TESTS / "fakes" / "agent.py"
# How tests name a scenario: editor.fake_agent(NAME), [sys.executable, FAKE, NAME],
# and the start/open_with helpers of a test file.
NAMED = re.compile(r'(?:fake_agent\(|FAKE, |start\(editor, |open_with\(editor, )"([^"]+)"')


def test_every_scenario_a_test_names_exists() -> None:
    named = {name for path in TESTS.rglob("test_*.py") for name in NAMED.findall(path.read_text())}
    assert len(named) > 20  # the pattern still finds them
    assert sorted(named - SCENARIOS.keys()) == []


def test_an_unknown_scenario_is_an_error_not_an_echo() -> None:
    run = subprocess.run(
        [sys.executable, str(AGENT), "no_such_scenario"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30,
    )  # fmt: skip
    assert run.returncode == 1
    assert "no scenario 'no_such_scenario'" in run.stderr
