"""Every entry point of ``python -m dartlib`` answers a bad input with one line on stderr (the file
or variable, what is wrong, the remedy) and a stated exit status (docs/cli.md), never a traceback;
the environment is checked before anything is written."""

from __future__ import annotations

import argparse
import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dartlib import cli
from dartlib.cli import common
from dartlib.environment import VARIABLES, check_environment

REPO = Path(__file__).resolve().parents[1]

# One valid command line per entry point (leaf subcommand); the test below checks the list is whole.
ENTRY_POINTS = {
    "run": ["run", "--profile", "smoke", "01"],
    "book": ["book", "--profile", "smoke"],
    "lab": ["lab", "--no-browser"],
    "refresh": ["refresh", "01"],
    "profiles": ["profiles"],
    "data status": ["data", "status"],
    "data download": ["data", "download", "fmnist"],
    "data prepare": ["data", "prepare", "fmnistc"],
    "data pack-cifar10": ["data", "pack-cifar10", "--out", "packed.xz"],
    "travel copy": ["travel", "copy", "--out", "copy"],
    "travel patterns": ["travel", "patterns"],
    "travel split": ["travel", "split", "file.bin", "--out", "parts"],
    "travel join": ["travel", "join", "parts/file.bin.parts.json"],
    "travel unpack-cifar10": ["travel", "unpack-cifar10", "--packed", "packed.xz", "--out", "unpacked"],
    "bench corruptions": ["bench", "corruptions"],
    "bench models": ["bench", "models"],
    "bench dart": ["bench", "dart"],
    "bench refiners": ["bench", "refiners"],
    "claims": ["claims"],
    "grid": ["grid", "table1", "--profile", "smoke"],
    "validate-alpha": ["validate-alpha"],
    "choose-alpha": ["choose-alpha", "--model", "model.py:Net", "--data", "train.npz"],
    "train": ["train", "--profile", "smoke"],
    "train-refiners": ["train-refiners", "--profile", "smoke", "--variants", "seed1"],
    "artefacts": ["artefacts", "verify"],
    "reference": ["reference", "check"],
}


def _leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [prefix.strip()]
    return [leaf for name, sub in subs[0].choices.items() for leaf in _leaf_commands(sub, f"{prefix} {name}")]


def test_the_walk_covers_every_entry_point():
    assert sorted(_leaf_commands(cli.build_parser())) == sorted(ENTRY_POINTS)


def _file(tmp_path: Path) -> str:
    (tmp_path / "a-file").write_text("not a folder")
    return str(tmp_path / "a-file")


# (variable, bad value or a callable of tmp_path giving one, words the line must hold)
BAD_ENVIRONMENT = [
    ("DART_WORKERS", "0", "expected a positive whole number"),
    ("DART_WORKERS", "abc", "expected a positive whole number"),
    ("DART_WORKERS", "\u00b2", "(ASCII digits)"),  # str.isdigit takes a superscript two; int() does not
    ("DART_DEVICE", "cuda:\u00b2", "valid: cpu, cuda, cuda:<index>"),
    ("DART_CLAIM_WAIT", "soon", "expected a positive whole number"),
    ("DART_PRECISION", "fp8", "valid: bf16, fp32"),  # refused on a CPU machine too, where it would not apply
    ("DART_DEVICE", "tpu", "valid: cpu, cuda, cuda:<index>"),
    ("DART_TF32", "off", "valid: 0, 1"),
    ("DART_TRACEBACK", "yes", "valid: 0, 1"),
    ("DART_DATA_DIR", _file, "exists and is not a folder"),
    ("DART_CIFAR10_DIR", _file, "exists and is not a folder"),
    ("DART_OUTPUT_PROFILE", "smoek", "not a profile; valid:"),
]


def test_every_variable_the_suite_reads_is_in_the_table():
    """A new ``os.environ`` read of a DART_ variable must come with its check (dartlib.environment)."""
    import re

    read = set()
    for path in (REPO / "dartlib").rglob("*.py"):
        read |= set(re.findall(r"""(?:environ(?:\.get)?\(|environ\[|setting\(|location\()\s*["'](DART_[A-Z0-9_]+)""",
                               path.read_text()))
    read |= {"DART_OUTPUT_DIR", "DART_OUTPUT_PROFILE"}  # read through dartlib.paths' names for them
    assert read <= set(VARIABLES), sorted(read - set(VARIABLES))


@pytest.mark.parametrize("name,value,words", BAD_ENVIRONMENT, ids=[f"{n}={v if isinstance(v, str) else 'file'}"
                                                                   for n, v, _ in BAD_ENVIRONMENT])
def test_a_bad_variable_is_refused_by_every_entry_point_before_anything_runs(tmp_path, monkeypatch, capsys, name,
                                                                              value, words):
    value = value(tmp_path) if callable(value) else value
    for other in VARIABLES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    ran = []
    for command, argv in ENTRY_POINTS.items():
        parser = cli.build_parser()
        monkeypatch.setattr(cli, "build_parser", lambda parser=parser: parser)
        for action in [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]:
            for sub in action.choices.values():  # every command body replaced: reaching one is a failure
                sub.set_defaults(func=lambda args, c=command: ran.append(c) or 0)
                for inner in [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]:
                    for leaf in inner.choices.values():
                        leaf.set_defaults(func=lambda args, c=command: ran.append(c) or 0)
        assert cli.main(argv) == common.EXIT_USAGE, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {name}={value!r}: ") and words in err, (command, err)
        assert f"unset {name}" in err
    assert ran == []
    assert [p.name for p in tmp_path.iterdir() if p.name != "a-file"] == []  # nothing written


def test_a_valid_environment_passes():
    check_environment({"DART_WORKERS": "4", "DART_PRECISION": "fp32", "DART_DEVICE": "cpu", "DART_TF32": "0",
                       "DART_DATA_DIR": "/no/such/folder/yet", "DART_OUTPUT_PROFILE": "cpu", "DART_WORKERS_X": "?"})


def test_an_unknown_option_is_one_line_for_every_entry_point(capsys):
    for command, argv in ENTRY_POINTS.items():
        with pytest.raises(SystemExit) as stop:
            cli.main(argv + ["--no-such-option"])
        assert stop.value.code == common.EXIT_USAGE, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unrecognized argument" in err, (command, err)


@pytest.mark.parametrize("error,code,words", [
    (RuntimeError("size mismatch for conv.weight: copying a param with shape [8] from [4]"), common.EXIT_FAILED,
     "RuntimeError: size mismatch for conv.weight"),
    (json.JSONDecodeError("Expecting value", "{", 1), common.EXIT_DAMAGED, "a damaged JSON file"),
    (lzma.LZMAError("Corrupt input data"), common.EXIT_DAMAGED, "a damaged lzma file"),
    (PermissionError(13, "Permission denied", "/some/file"), common.EXIT_NOT_WRITABLE, "/some/file"),
    (FileNotFoundError(2, "No such file or directory", "/no/file"), common.EXIT_MISSING, "/no/file: No such file"),
])
def test_an_error_no_command_explains_is_still_one_line(monkeypatch, capsys, error, code, words):
    def fails(args):
        raise error

    monkeypatch.setattr(cli.run, "_cmd_profiles", fails)
    monkeypatch.delenv("DART_TRACEBACK", raising=False)
    assert cli.main(["profiles"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err
    if code == common.EXIT_FAILED:
        assert "(at test_cli_errors.py" not in err and "DART_TRACEBACK=1" in err
        monkeypatch.setenv("DART_TRACEBACK", "1")  # the full traceback, on request
        with pytest.raises(RuntimeError):
            cli.main(["profiles"])


# --------------------------------------------------------------------------- as a user meets them


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory):
    """A folder of bad inputs: a file in parts and its manifest cut short, a part missing, a part
    altered; an lzma archive cut short; a plain file where a packed folder is expected."""
    from dartlib.data.travel import split_file

    root = tmp_path_factory.mktemp("bad")
    (root / "blob.bin").write_bytes(os.urandom(300_000))
    for case in ("cut", "missing", "altered"):
        manifest = split_file(root / "blob.bin", root / case, part_bytes=100_000)
    text = (root / "cut" / "blob.bin.parts.json").read_text()
    (root / "cut" / "blob.bin.parts.json").write_text(text[: len(text) // 2])
    (root / "missing" / "blob.bin.part001").unlink()
    part = root / "altered" / "blob.bin.part002"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    packed = lzma.compress(b"DARTPACK" + os.urandom(50_000))
    (root / "damaged.xz").write_bytes(packed[: len(packed) // 2])
    (root / "plain.xz").write_bytes(lzma.compress(b"not a packed folder"))
    (root / "nonempty").mkdir()
    (root / "nonempty" / "x").write_text("")
    assert manifest.is_file()
    return root


CASES = [  # (name, environment, argv, exit status, words of the line)
    ("join: manifest cut short", {}, ["travel", "join", "{bad}/cut/blob.bin.parts.json"], 4,
     "cut/blob.bin.parts.json: not a parts manifest (JSONDecodeError"),
    ("join: a part missing", {}, ["travel", "join", "{bad}/missing/blob.bin.parts.json"], 4,
     "missing/blob.bin.part001: missing (part of blob.bin"),
    ("join: a part altered", {}, ["travel", "join", "{bad}/altered/blob.bin.parts.json"], 4,
     "altered/blob.bin.part002: 100000 bytes, sha256"),
    ("join: no manifest", {}, ["travel", "join", "{bad}/none.parts.json"], 4, "none.parts.json: no such manifest"),
    ("unpack: archive cut short", {}, ["travel", "unpack-cifar10", "--packed", "{bad}/damaged.xz", "--out", "{out}"], 4,
     "damaged.xz is damaged: not a complete lzma stream"),
    ("unpack: not a packed folder", {}, ["travel", "unpack-cifar10", "--packed", "{bad}/plain.xz", "--out", "{out}"], 4,
     "plain.xz is damaged: not a packed image folder"),
    ("unpack: no archive", {}, ["travel", "unpack-cifar10", "--packed", "{bad}/none.xz", "--out", "{out}"], 3,
     "none.xz: No such file or directory"),
    ("split: --part-mib 0", {}, ["travel", "split", "{bad}/blob.bin", "--out", "{out}", "--part-mib", "0"], 2,
     "argument --part-mib: expected a size in MiB of at least one byte"),
    ("split: no file", {}, ["travel", "split", "{bad}/none.bin", "--out", "{out}"], 3, "none.bin: no such file to split"),
    ("DART_WORKERS=0", {"DART_WORKERS": "0"}, ["data", "prepare", "fmnistc"], 2, "DART_WORKERS='0'"),
    ("DART_WORKERS=abc", {"DART_WORKERS": "abc"}, ["grid", "table1", "--profile", "smoke"], 2, "DART_WORKERS='abc'"),
    ("DART_PRECISION=fp8 on the CPU", {"DART_PRECISION": "fp8", "DART_DEVICE": "cpu"},
     ["grid", "table1", "--profile", "smoke"], 2, "DART_PRECISION='fp8': valid: bf16, fp32"),
    ("DART_DEVICE=tpu", {"DART_DEVICE": "tpu"}, ["bench", "models"], 2, "DART_DEVICE='tpu': valid: cpu, cuda"),
    ("run --publish on smoke", {}, ["run", "--profile", "smoke", "--publish", "01"], 2,
     "run --publish: the smoke profile's executed notebooks are the committed ones"),
    ("travel copy into a folder in use", {}, ["travel", "copy", "--out", "{bad}/nonempty"], 2,
     "nonempty is not empty: give a new folder"),
    ("a data root where no file can be made", {"DART_DATA_DIR": "/proc/no-such-root"}, ["data", "download", "fmnist"],
     5, "cannot write /proc/no-such-root: no file can be created in /proc"),
    ("reference check: unknown profile", {}, ["reference", "check", "--profile", "smoek"], 2, "unknown profile 'smoek'"),
    ("grid --rekey (removed)", {}, ["grid", "table1", "--profile", "smoke", "--rekey"], 2,
     "unrecognized argument: --rekey"),
]


@pytest.mark.parametrize("name,env,argv,code,words", CASES, ids=[c[0] for c in CASES])
def test_python_m_dartlib_answers_bad_input_with_one_line(bad_inputs, tmp_path, name, env, argv, code, words):
    argv = [a.format(bad=bad_inputs, out=tmp_path / "out") for a in argv]
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    environ.update({"PYTHONPATH": str(REPO), "DART_DATA_DIR": str(tmp_path / "data"), "TQDM_DISABLE": "1", **env})
    done = subprocess.run([sys.executable, "-m", "dartlib", *argv], capture_output=True, text=True, env=environ,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()  # nothing written
