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


def _python_blocks(text: str) -> list[str]:
    blocks, inside, lines = [], False, []
    for line in text.splitlines():
        if line.strip() == "```python":
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            blocks.append("\n".join(lines) + "\n")
        elif inside:
            lines.append(line)
    return blocks


def test_readme_examples_run():
    """Blocks naming an outside-package file are that file (the third-party test runs it in a sweep);
    every other Python block of the README is executed here."""
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 8
    executed = 0
    for block in blocks:
        first, _, body = block.partition("\n")
        if first.startswith("# values_seg_example/"):
            path = ROOT / "tests" / "outside_plugin" / first[2:].strip()
            assert path.read_text() == body, f"README block differs from {path}"
        else:
            exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
            executed += 1
    assert executed >= 2
