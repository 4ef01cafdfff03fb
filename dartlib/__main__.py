"""Command line: ``python -m dartlib {run,refresh,profiles} ...``."""

from dartlib.cli import main

raise SystemExit(main())
