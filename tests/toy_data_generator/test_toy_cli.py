"""``toy generate`` on the command line: options, summary, clear errors."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from toy_data_generator import cli, io

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--size", "32", "--train-cases", "4", "--val-cases", "2", "--workers", "1"]


def test_generate(tmp_path, capsys):
    out = tmp_path / "toy"
    assert (
        cli.main(["generate", "--scenario", "3a", "--out", str(out), "--seed", "3", *QUICK, "--preview-cases", "2"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "toy scenario 3a, 2D, size 32, seed 3" in printed
    assert "test    63 cases: 21 i.i.d. (0 blurred), 42 OoD [14 cube, 14 grey, 14 border]" in printed
    assert (out / "preview.png").is_file() and "preview.png" in printed
    assert len(io.read_manifest(out)) == 4 + 2 + 63


def test_lead_can_mount_it_as_a_subcommand(tmp_path):
    parser = argparse.ArgumentParser(prog="values-seg")
    toy = parser.add_subparsers(dest="cmd").add_parser("toy").add_subparsers(dest="toy_cmd")
    cli.configure_parser(toy.add_parser("generate"))
    args = parser.parse_args(
        [
            "toy",
            "generate",
            "--scenario",
            "1",
            "--out",
            str(tmp_path),
            "--dims",
            "3",
            "--size",
            "22",
            "--train-cases",
            "2",
            "--val-cases",
            "1",
            "--no-preview",
        ]
    )
    assert args.dims == 3 and args.preview is False
    assert cli.generate_command(args) == 0
    assert not (tmp_path / "preview.png").exists()


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--scenario", "4"], "unknown toy scenario '4'; valid scenarios: 1, 2, 3a, 3b"),
        (["--scenario", "1", "--dims", "4"], "dims must be 2 or 3, got 4"),
        (["--scenario", "1", "--size", "16"], "size 16 is too small"),
        (["--scenario", "1", "--pool-ood", "-2"], "pool_ood must be an integer >= 0"),
    ],
)
def test_bad_parameters(tmp_path, capsys, argv, message):
    assert cli.main(["generate", "--out", str(tmp_path / "x"), *argv]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err
    assert not (tmp_path / "x").exists()


def test_existing_output_needs_overwrite(tmp_path, capsys):
    argv = ["generate", "--scenario", "2", "--out", str(tmp_path), *QUICK, "--no-preview"]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert cli.main(argv + ["--overwrite"]) == 0


def test_python_dash_m(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "toy_data_generator",
            "generate",
            "--scenario",
            "2",
            "--out",
            str(tmp_path),
            *QUICK,
            "--no-preview",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard
    )
    assert result.returncode == 0, result.stderr
    assert "wrote 69 cases (276 NIfTI files)" in result.stdout
