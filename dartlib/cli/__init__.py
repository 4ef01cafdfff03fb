"""The ``python -m dartlib`` command line."""

# The parser is assembled here from one module per command group (run, results, data, bench, grid,
# alpha, train), each defining its commands' options and thin handlers; the shared argument types,
# parser class and exit statuses are in dartlib.cli.common.

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from dartlib.cli import alpha, bench, data, grid, results, run, train
from dartlib.cli.common import (EXIT_DAMAGED, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_MISSING, EXIT_NOT_WRITABLE,
                                EXIT_USAGE, Parser, RunningCommand)
from dartlib.registry import UnknownNameError

RESUMABLE = ("grid", "run", "train", "train-refiners")  # commands that keep finished work: an interrupted one is resumed by running it again
# Commands an installed copy runs (docs/install.md); every other one reads the notebooks, profiles or
# committed rows of a checkout.
WITHOUT_CHECKOUT = ("choose-alpha", "data")

# One function a command, in the order `python -m dartlib --help` lists them.
COMMAND_PARSERS = (run.add_run, results.add_book, run.add_lab, run.add_refresh, run.add_profiles,
                   data.add_data, data.add_travel, bench.add_bench, results.add_claims,
                   grid.add_grid, alpha.add_validate_alpha, alpha.add_choose_alpha,
                   train.add_train_refiners, train.add_train, train.add_artefacts,
                   results.add_reference)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m dartlib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMAND_PARSERS:
        add(sub)
    return parser


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 naming an unknown option of the chosen (sub)command and the nearest valid one."""
    import difflib

    while True:  # the deepest subcommand chosen
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or getattr(args, subs[0].dest, None) not in subs[0].choices:
            break
        parser = subs[0].choices[getattr(args, subs[0].dest)]
    options = [o for a in parser._actions for o in a.option_strings]
    words = []
    for word in extra:
        close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6) if word.startswith("-") else []
        words.append(f"{word} (did you mean {close[0]}?)" if close else word)
    parser.error(f"unrecognized argument{'s' if len(extra) > 1 else ''}: {', '.join(words)}")


def _stop_on_signal(signum: int, _frame) -> None:
    """SIGTERM or SIGHUP (``kill``, make passing on its own SIGTERM, a closed terminal) stop the
    command as Ctrl-C does: files being written are removed, kernels and workers are shut down, and
    a command that resumes says how."""
    raise KeyboardInterrupt


def signals_stop_the_command() -> None:
    """Installed by ``python -m dartlib`` (not by a test calling :func:`main`): SIGTERM and SIGHUP
    raise KeyboardInterrupt, and under make the process ends with make."""
    import os
    import signal

    if threading_main():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _stop_on_signal)
    # Under make (MAKELEVEL set), this process also ends when make is killed outright (SIGKILL): make
    # cannot pass that on, the kernel can (Linux's parent-death signal).
    if os.environ.get("MAKELEVEL") and sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _one_line_warnings():
    """The suite's warnings (stale rows recomputed, a cache discarded) as one ``warning:`` line on
    stderr each, while a command runs."""
    import contextlib
    import warnings

    @contextlib.contextmanager
    def installed():
        show = warnings.showwarning

        def one_line(message, category, filename, lineno, file=None, line=None):
            if category.__module__.startswith("dartlib"):
                print(f"warning: {message}", file=sys.stderr if file is None else file)
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = one_line
        try:
            yield
        finally:
            warnings.showwarning = show

    return installed()


def _where(err: BaseException) -> str:
    """``file:line in function`` of the innermost frame of ``err``'s traceback in the suite's code."""
    import traceback

    frames = [f for f in traceback.extract_tb(err.__traceback__) if "dartlib" in f.filename.replace("\\", "/")]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {Path(f.filename).name}:{f.lineno} in {f.name})"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _runs_here(command: str) -> bool:
    """Whether ``command`` can run from here: an installed copy (no checkout) runs only the commands
    of :data:`WITHOUT_CHECKOUT`; the others say so in one line."""
    from dartlib.paths import from_checkout

    if command in WITHOUT_CHECKOUT or from_checkout():
        return True
    print(f"error: `python -m dartlib {command}` works on a checkout of the repository (its notebooks, "
          f"profiles and committed rows), which an installed copy does not hold: clone the repository and run it "
          f"there; an installed copy runs {' and '.join(WITHOUT_CHECKOUT)} (docs/install.md)", file=sys.stderr)
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m dartlib``: the command's exit status; every error is one line on stderr naming the
    file or variable, what is wrong and the remedy (exit statuses: :data:`dartlib.cli.common.EXIT_USAGE` and
    the others there, listed in docs/cli.md)."""
    import json
    import lzma

    from dartlib.data.files import DamagedFileError, as_write_error
    from dartlib.data.travel import PartsError
    from dartlib.environment import EnvironmentSettingError, check_environment, setting
    from dartlib.experiments.cell_claims import ClaimWaitTimeout
    from dartlib.profiles import ProfileError

    argv = sys.argv[1:] if argv is None else argv
    RunningCommand.argv = list(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unknown_options(parser, args, extra)
    if not _runs_here(args.command):
        return EXIT_MISSING
    try:
        check_environment()  # every variable the suite reads, before anything is written
    except EnvironmentSettingError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with _one_line_warnings():
            return args.func(args)
    except KeyboardInterrupt:
        hint = f"; resume with: python -m dartlib {shlex.join(argv)}" if args.command in RESUMABLE else ""
        print(f"interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ClaimWaitTimeout as err:  # names the cell, the process holding it and what to do
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except (DamagedFileError, PartsError) as err:  # each names the file, what is wrong and the remedy
        print(f"error: {err}", file=sys.stderr)
        return EXIT_DAMAGED
    except (UnknownNameError, ProfileError, EnvironmentSettingError) as err:  # bad settings: nothing computed
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as err:  # DataMissingError says what is missing and how to get it
        text = str(err) if err.filename is None else f"{err.filename}: {err.strerror}; check the path given"
        print(f"error: {text}", file=sys.stderr)
        return EXIT_MISSING
    except NotADirectoryError as err:
        print(f"error: {err.strerror}", file=sys.stderr)
        return EXIT_NOT_WRITABLE
    except FileExistsError as err:  # a new folder was asked for (travel copy --out): the message names it
        print(f"error: {err.strerror if err.filename else _first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:  # no space, no permission, a read-only device: the path and what to free or change
        problem = as_write_error(err)
        if problem is None:
            problem = (f"{err.filename}: {err.strerror}; check that the path can be read and written" if err.filename
                       else err.strerror or _first_line(err))
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_NOT_WRITABLE
    except (json.JSONDecodeError, lzma.LZMAError) as err:  # a reader that did not name its file
        print(f"error: a damaged {'JSON' if isinstance(err, json.JSONDecodeError) else 'lzma'} file "
              f"({_first_line(err)}){_where(err)}; fetch or write it again", file=sys.stderr)
        return EXIT_DAMAGED
    except ModuleNotFoundError as err:  # an optional command without its extra: the line that installs it
        from dartlib.extras import missing_module_message

        line = missing_module_message(err, command=args.command)
        if line is None or setting("DART_TRACEBACK") == "1":
            raise
        print(f"error: {line}", file=sys.stderr)
        return EXIT_MISSING
    except Exception as err:  # not a failure the suite knows: still one line, with where it happened
        if setting("DART_TRACEBACK") == "1":
            raise
        print(f"error: {type(err).__name__}: {_first_line(err)}{_where(err)}; this is not a failure the suite "
              f"knows how to explain: rerun with DART_TRACEBACK=1 for the full traceback and report it",
              file=sys.stderr)
        return EXIT_FAILED
