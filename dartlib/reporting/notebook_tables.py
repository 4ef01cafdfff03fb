"""A notebook's table beside the paper's, titled with what both come from (notebooks 08 and 09)."""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd

from dartlib.data.corruptions import CORRUPTIONS
from dartlib.experiments.settings import Settings
from dartlib.reporting.tables import beside_paper, render


def profile_note(settings: Settings) -> str:
    """What our numbers and the paper's come from, for table titles."""
    s = settings
    return (f"{s.profile} profile: {s['source_arch']}, {s['corrupted_dataset']}, seed {s['seed']}; "
            "paper: ResNet-26, CIFAR-10-C, 4 seeds")


def show(name: str, frame: pd.DataFrame, paper: pd.DataFrame, *, settings: Settings, columns: str,
         order: list[str], caption: str, covers: Collection[str] | None = CORRUPTIONS) -> pd.DataFrame:
    """Our table beside the paper's (paper values only on CIFAR-10-C profiles), printed and written
    to ``results/<profile>/tables/``; a row averaged over other corruptions than ``covers`` gets no
    delta."""
    title = f"{caption} ({profile_note(settings)})"
    table = beside_paper(frame, paper if settings["corrupted_dataset"] == "cifar10c" else None,
                         profile=settings.profile, name=name, title=title, columns=columns, row_order=order,
                         paper_covers=covers)
    print(render(table, title=title))
    return table
