"""Command line: ``python -m dartlib {run,refresh,profiles} ...``."""

from dartlib.cli import main, signals_stop_the_command

signals_stop_the_command()
raise SystemExit(main())
