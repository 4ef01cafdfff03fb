"""What every command module of ``python -m dartlib`` shares: the argument types, the parser class
whose help shows each default, the exit statuses, and the check that the folders a command writes
take a file before anything is computed."""

from __future__ import annotations

import argparse
from pathlib import Path

# Exit statuses (docs/cli.md lists them): what a script calling the suite can rely on.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MISSING, EXIT_DAMAGED, EXIT_NOT_WRITABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 5, 130

PROFILE_HELP = "profile name: a file notebooks/profiles/<name>.yaml (python -m dartlib profiles lists them)"
DATA_ROOT_CHANGE = "point DART_DATA_DIR at a folder on a writable device with space"


class RunningCommand:
    """The arguments of the running command, set by :func:`dartlib.cli.main`: a command that is
    interrupted inside its own handler (``grid --backend ray``) repeats them in its resume hint."""

    argv: list[str] | None = None


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def part_size_mib(text: str) -> float:
    """An argparse type: a part size in MiB, a finite number of at least one byte."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in MiB such as 16, got {text!r}") from None
    if not (value * 1024 * 1024 >= 1 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a size in MiB of at least one byte (such as 16), got {text}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def float_list(text: str) -> list[float]:
    """An argparse type: comma-separated numbers, e.g. ``0.1,1,10``."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers such as 0.1,1,10, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def names_of(kind: str):
    """An argparse type: a name of ``kind`` (corruption, architecture, recipe, dataset: the names a
    profile may use, :data:`dartlib.schema.NAME_KINDS`); an unknown one names the nearest valid one."""

    def check(text: str) -> str:
        from dartlib.schema import NAME_KINDS, nearest

        valid = NAME_KINDS[kind]()
        if text not in valid:
            close = nearest(text, valid)
            raise argparse.ArgumentTypeError(f"unknown {kind} {text!r}{f' (did you mean {close!r}?)' if close else ''}; "
                                             f"valid: {', '.join(valid)}")
        return text

    check.__name__ = kind  # argparse names the type in some messages
    return check


class HelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, ``(default: ...)``, unless the help already says
    it; an option that is off or unset unless given (a flag, a value with no default) has none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)) or (
                not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)):
            return text
        shown = ", ".join(map(str, action.default)) if isinstance(action.default, list) else "%(default)s"
        return f"{text} (default: {shown})"


class Parser(argparse.ArgumentParser):
    """An argument error is one line on stderr (the usage is one --help away), exit status 2; every
    option's help shows its default (:class:`HelpFormatter`; subcommands' parsers are this class too)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def grid_settings(settings, grid: str):
    """``settings`` as grid ``grid`` runs with them: held at the former shortcut where the profile still
    holds the grid's study there (:func:`~dartlib.experiments.settings.study_of`), else as they are."""
    from dartlib.experiments.settings import study_of

    study = study_of(grid)
    return settings.for_study(study) if study else settings


def writable(*folders: tuple[Path, str]) -> None:
    """Before anything is computed: every folder the command writes (``(folder, the alternative to
    offer)``) must take a file, else one line naming it and what to free or change
    (:class:`dartlib.data.files.NotWritableError`, exit 5)."""
    from dartlib.data.files import check_writable

    for folder, change in folders:
        check_writable(folder, change=change)


def repo_folder(*parts: str) -> tuple[Path, str]:
    """A folder of the repository a command writes, with the alternative to offer: a writable checkout."""
    from dartlib.paths import REPO_ROOT

    return REPO_ROOT.joinpath(*parts), f"work in a clone of the repository on a writable device (git clone {REPO_ROOT})"


def data_folders(*parts: str) -> list[tuple[Path, str]]:
    """The data root (caches, generated test sets) and its checkpoints/ (trained models and refiners)."""
    from dartlib.paths import data_root

    return [(data_root().joinpath(*parts), DATA_ROOT_CHANGE), (data_root() / "checkpoints", DATA_ROOT_CHANGE)]
