"""``book``, ``claims`` and ``reference``: a profile's results read back, as its results book, its
claims ledger and its comparison with the stored values."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dartlib.cli.common import PROFILE_HELP, repo_folder, writable
from dartlib.profiles import DEFAULT_PROFILE


def _cmd_book(args: argparse.Namespace) -> int:
    from dartlib.book.site import build_book
    from dartlib.schema import checked_profile

    checked_profile(args.profile)
    from dartlib.book.site import BOOK_DIR

    out = Path(args.out) if args.out else BOOK_DIR / args.profile
    writable((out.parent, "give another folder with --out DIR"))
    try:
        index = build_book(profile=args.profile, out=Path(args.out) if args.out else None, progress=True)
    except RuntimeError as err:  # Sphinx's own messages are above; the previous book is left as it was
        print(f"error: {err}", file=sys.stderr)
        return 1
    pages = sorted(p for p in index.parent.rglob("*.html") if p.name not in ("genindex.html", "search.html"))
    print(f"{args.profile} book: {len(pages)} pages; open {index}")
    return 0


def _cmd_claims(args: argparse.Namespace) -> int:
    from dartlib.book.claims import evaluate
    from dartlib.book.claims_page import render
    from dartlib.schema import checked_profile as load_profile  # checked before anything runs

    from dartlib.experiments.settings import Settings

    settings = Settings.from_params(load_profile(args.profile))
    table = evaluate(args.profile, corrupted_dataset=settings.test.corrupted_dataset)
    print(render(table, profile=args.profile))
    return 0


def _cmd_reference(args: argparse.Namespace) -> int:
    from dartlib.reporting import reference

    from dartlib.schema import checked_profile

    checked_profile(args.profile)  # an unknown name lists the valid ones (exit 2)
    if args.action == "update":
        writable(repo_folder("tests", "golden", args.profile))
        print(f"stored the results of profile {args.profile} in {reference.update_reference(args.profile)}")
        return 0
    compared, problems = reference.compare_profile(args.profile)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    print(f"{compared} cells compared; {len(problems)} difference(s) beyond tolerance")
    return 1 if problems else 0


def add_book(sub) -> None:
    book = sub.add_parser("book", help="build a profile's results book (static HTML) from its executed notebooks")
    book.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    book.add_argument("--out", help="output folder (default: build/book/<profile>/)")
    book.set_defaults(func=_cmd_book)


def add_claims(sub) -> None:
    claims = sub.add_parser("claims", help="check the paper's claims (data/paper/claims.yaml) on a profile's results")
    claims.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    claims.set_defaults(func=_cmd_claims)


def add_reference(sub) -> None:
    ref = sub.add_parser("reference", help="a profile's results against the stored values (tests/golden/<profile>/)")
    ref.add_argument("action", choices=["check", "update"],
                     help="check: compare within the stated tolerances; update: store the current results")
    ref.add_argument("--profile", default=DEFAULT_PROFILE, help=PROFILE_HELP)
    ref.set_defaults(func=_cmd_reference)
