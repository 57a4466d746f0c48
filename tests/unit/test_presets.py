"""Agent presets from the ACP registry snapshot, and what :checkhealth says of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from acp_nvim.client.config import builtin_agents, load_config
from acp_nvim.health import report

REPO = Path(__file__).resolve().parents[2]
GEN = REPO / "scripts" / "gen_presets.py"


def test_every_registry_agent_is_a_preset_launched_as_the_registry_says() -> None:
    agents = builtin_agents()
    assert agents["auggie"].cmd == ["npx", "-y", "@augmentcode/auggie@0.15.0", "--acp"]
    assert agents["auggie"].env == {"AUGMENT_DISABLE_AUTO_UPDATE": "1"}
    assert agents["kimi"].cmd == ["kimi", "acp"]  # a binary: by its name on PATH
    assert agents["qwen-code"].mode == "default"  # a quirk, as data on the preset
    # ... sent the one way qwen switches (its mode config option does not).
    assert agents["qwen-code"].set_mode and agents["qwen"].set_mode


def test_hand_tuned_entries_win_and_options_override_presets() -> None:
    agents = builtin_agents()
    assert agents["gemini"].cmd == ["gemini", "--acp"]  # the registry's is older
    assert agents["gemini"].missing_file_as_empty
    config = load_config({"agents": {"kimi": {"cmd": ["/opt/kimi", "acp"]}}})
    assert config.agent("kimi")[1].cmd == ["/opt/kimi", "acp"]


def test_health_says_why_a_preset_cannot_start(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", "/nonexistent")
    agents = report({})["agents"]
    assert agents["auggie"]["found"] is None
    assert agents["auggie"]["needs"] == "npx (Node.js)"
    assert agents["kimi"]["needs"] == "'kimi' on PATH"


def gen_presets(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GEN), "--check", *args], capture_output=True, text=True, timeout=60
    )


def test_the_presets_come_from_the_snapshot_the_repository_carries() -> None:
    done = gen_presets()
    assert done.returncode == 0, done.stderr
    assert "Apache License" in (REPO / "spec" / "acp-registry" / "LICENSE").read_text()


def test_check_says_a_missing_snapshot_is_missing(tmp_path: Path) -> None:
    done = gen_presets("--registry", str(tmp_path / "agents"))
    assert done.returncode == 1
    assert "source missing" in done.stderr and "out of date" not in done.stderr
