"""Every option of ``python -m dartlib`` says what it is and, where it has one, its default."""

from __future__ import annotations

import argparse
import re

from dartlib.cli import build_parser


def _options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, its parser, one of its arguments) for every argument of every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield path, parser, action


def test_every_option_has_help_and_shows_its_default():
    problems = []
    for path, parser, action in _options(build_parser()):
        name = " ".join(path) + " " + (action.option_strings[0] if action.option_strings else action.dest)
        if not (action.help or "").strip():
            problems.append(f"{name}: no help text")
            continue
        shown = " ".join(parser.format_help().split())
        line = parser._get_formatter()._expand_help(action) if action.help else ""
        if action.default is not None and action.default is not False and "default" not in line:
            problems.append(f"{name}: its default {action.default!r} is not shown")
        assert " ".join(line.split())[:40] in shown
    assert not problems, "\n".join(problems)


def test_the_help_of_book_and_train_shows_the_defaults():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    book = " ".join(sub["book"].format_help().split())
    assert re.search(r"--profile PROFILE profile name.*\(default: smoke\)", book)
    train = " ".join(sub["train"].format_help().split())
    for option in ("--dataset", "--arch", "--recipe", "--seed"):
        assert re.search(rf"{option} \w+ .*?default: the profile's", train), option
