"""The cost table beside the paper's (Appendix, computational cost): its numbers come from its GPU,
ours from the device named beside them."""

from __future__ import annotations

import pandas as pd

from dartlib.experiments.settings import Settings
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import row_label


def cost_rows(ours: pd.DataFrame) -> pd.DataFrame:
    """Our cost rows (``results/<profile>/costs.csv``) merged with the paper's (suffix ``_paper``),
    a ``row`` label first and the wall clocks also relative to BNAdapt's."""
    paper = load_table("app_cost")[["method", "refiner", "params_m", "trainable_params_m", "flops_g", "wall_clock_s"]]
    bnadapt = paper.set_index(["method", "refiner"]).loc[("bnadapt", "none"), "wall_clock_s"]
    paper["wall_clock_vs_bnadapt"] = paper.wall_clock_s / bnadapt
    side = ours.merge(paper, on=["method", "refiner"], how="left", suffixes=("", "_paper"))
    side.insert(0, "row", [row_label(m, r) for m, r in zip(side.method, side.refiner)])
    return side


def costs_beside_paper(*, ours: pd.DataFrame, settings: Settings, device_name: str, images: int) -> pd.DataFrame:
    """:func:`cost_rows`, printed with the two devices named."""
    side = cost_rows(ours)
    print(f"ours: {settings['source_arch']} on {device_name}, {images} images ({settings.profile} profile); "
          f"paper: ResNet-26 on its GPU, CIFAR-10-C")
    print(side.drop(columns=["method", "refiner", "device", "images"]).round(4).to_string(index=False))
    return side
