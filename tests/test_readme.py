"""The README's test command is exactly what CI runs; the README's and the docs' code blocks run."""

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLOW_FILE = "tests/toy_data_generator/test_toy_io.py"  # a quick file to collect that holds a slow test


def test_ci_runs_the_readme_test_command():
    ci_commands = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert ci_commands, "CI runs nothing"
    readme = (ROOT / "README.md").read_text()
    for command in ci_commands:
        assert f"\n{command}\n" in readme, f"CI command not in README: {command}"


def _readme_pytest_args() -> list[str]:
    """The pytest arguments of the test command CI runs (the README's), without xdist's ``-n N``."""
    command = next(line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "-m pytest" in line)
    args = shlex.split(command.split("-m pytest", 1)[1].split("&&")[0])
    while "-n" in args:
        del args[args.index("-n"):args.index("-n") + 2]
    return args


def _collected(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", SLOW_FILE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_ci_runs_the_slow_tests_too():
    """CI's (the README's) test command selects the slow tests; the README says how to leave them out."""
    slow = _collected("-m", "slow")
    assert slow, f"no slow test in {SLOW_FILE} to check with"
    everything = _collected(*_readme_pytest_args())
    assert slow <= everything, f"CI's test command leaves out the slow tests {sorted(slow - everything)}"
    assert slow.isdisjoint(_collected("-m", "not slow"))
    assert '-m "not slow"' in (ROOT / "README.md").read_text(), "README: say how to skip the slow tests"


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


DOC_PAGES = sorted((ROOT / "docs").rglob("*.md"))


def test_examples_run():
    """Every Python block of the README and of the documentation pages: blocks naming an
    outside-package file are that file (the third-party test runs it in a sweep); every other
    block is executed here."""
    blocks = [(path, block) for path in [ROOT / "README.md", *DOC_PAGES] for block in _python_blocks(path.read_text())]
    assert len(blocks) >= 8
    executed = 0
    for page, block in blocks:
        first, _, body = block.partition("\n")
        outside = {"# values_seg_example/": "outside_plugin", "# values_seg_section_example/": "outside_section"}
        folder = next((f for prefix, f in outside.items() if first.startswith(prefix)), None)
        if folder:
            path = ROOT / "tests" / folder / first[2:].strip()
            assert path.read_text() == body, f"{page.relative_to(ROOT)}: block differs from {path}"
        else:
            exec(compile(block, str(page.relative_to(ROOT)), "exec"), {"__name__": "docs_example"})
            executed += 1
    assert executed >= 3
