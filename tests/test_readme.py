"""The README's test command is exactly what CI runs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    ci_commands = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_commands, "CI runs nothing"
    readme = (ROOT / "README.md").read_text()
    for command in ci_commands:
        assert f"\n{command}\n" in readme, f"CI command not in README: {command}"
