"""Command-line subcommands contributed by plugins (hook ``values_seg_cli``): the core's parser
names no dataset, and a third party adds a command the way the built-in datasets do."""

import subprocess
import sys
import textwrap

import pytest

from values_seg import cli, registry
from values_seg.registry import Registry

HELLO = '''
"""A third party's plugin that contributes one command."""
from values_seg import hookimpl


def hello(args):
    print(f"hello {args.who}")
    return 3


@hookimpl
def values_seg_cli(commands):
    p = commands.add_parser("hello", help="say hello")
    p.add_argument("--who", required=True)
    p.set_defaults(func=hello)
'''

CLASH = '''
from values_seg import hookimpl


@hookimpl
def values_seg_cli(data_commands):
    data_commands.add_parser("lidc", help="a second lidc")
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a module as a plugin through the entry-point group, in a fresh default registry."""

    names = []

    def install(name: str, source: str) -> None:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        dist = tmp_path / f"{name}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text(f"[values_seg]\n{name} = {name}\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setattr(registry, "_default", Registry())
        sys.modules.pop(name, None)
        names.append(name)

    yield install
    for name in names:  # imported during the test: gone with it (another test may use the name)
        sys.modules.pop(name, None)


def test_builtin_commands_come_from_their_plugins():
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    impls = registry.default()._pm.hook.values_seg_cli.get_hookimpls()
    sources = {impl.plugin_name.split(" ")[0] for impl in impls}
    assert {
        "values_seg_plugins.datasets.lidc",
        "values_seg_plugins.datasets.gta_cityscapes",
        "values_seg_plugins.datasets.nnunet_raw",
        "values_seg_plugins.datasets.toy",
        "values_seg_plugins.prediction_models.nnunet",
    } <= sources
    assert {"validate-nnunet", "toy"} <= set(commands)
    assert {"lidc", "gta-cityscapes", "nnunet-export"} <= set(commands["data"]._subparsers._group_actions[0].choices)


def test_the_core_parser_has_only_the_core_commands():
    commands = cli.build_parser(plugin_commands=False)._subparsers._group_actions[0].choices
    assert set(commands) == {*cli.CORE_COMMANDS, "data"}


def test_a_third_party_adds_a_command(installed, capsys):
    installed("acme_hello", HELLO)
    assert cli.main(["hello", "--who", "world"]) == 3
    assert capsys.readouterr().out == "hello world\n"


def test_a_command_name_taken_twice_names_the_plugin(installed, capsys):
    installed("acme_cli_clash", CLASH)
    assert cli.main(["data", "lidc", "prepare"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("values-seg: error: acme_cli_clash") and "lidc" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv, needed", [
    (["run", "x.yaml"], False), (["report", "runs/x"], False), (["compare", "r", "--vary", "measure"], False),
    (["plugins"], False), (["--version"], False), (["run", "--help"], False),
    (["--help"], True), ([], True), (["data", "lidc", "prepare"], True), (["toy", "generate"], True),
])
def test_plugins_are_imported_only_for_their_commands(argv, needed):
    assert cli.plugin_commands_needed(argv) is needed


def test_a_core_command_does_not_import_the_plugins():
    probe = ("import sys, contextlib, io\nfrom values_seg import cli\n"
             "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
             "    cli.main(['report', '--help'])\n"
             "print(sorted(m for m in sys.modules if m.startswith('values_seg_plugins.')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
