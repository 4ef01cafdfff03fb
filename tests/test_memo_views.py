"""MEMO at the MEMO authors' 32 views beside the profile's (dartlib.studies.memo_views): the grid's
cells are the profile's MEMO cells on the same streams with one option more, each cell's context
carries the view count its params name, and the block pairs the two."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pandas as pd

from dartlib.experiments.grid import SCHEMA
from dartlib.experiments.settings import Settings
from dartlib.studies import memo_views
from dartlib.studies.appendix_settings import memo_cells


def _settings() -> Settings:
    return Settings.from_profile("cpu", lt_rhos=[1, 100])


def test_the_cells_are_memos_on_the_same_streams_with_32_views_largest_rho_first():
    s = _settings()
    cells = memo_views.profile_cells(s)
    assert Counter((c.refiner, c.options["bn"]) for c in cells) == {("none", "stored"): 2, ("none", "adapted"): 2,
                                                                   ("dart", "adapted"): 2}
    assert {c.options["views"] for c in cells} == {32} and {c.corruption for c in cells} == set(memo_views.CORRUPTIONS)
    assert [float(c.shift_param) for c in cells] == [100.0] * 3 + [1.0] * 3
    # each cell is one of the profile's MEMO cells with views=32 added: the stream (seed, shift, corruption,
    # limit) is the same, so the two rows pair image by image
    profile = {(c.refiner, c.shift_param, c.corruption, c.params): c
               for c in memo_cells(s, corruptions=list(memo_views.CORRUPTIONS)) if c.method == "memo"}
    for cell in cells:
        twin = profile[(cell.refiner, cell.shift_param, cell.corruption, cell.params.replace(",views=32", ""))]
        assert replace(cell, params=twin.params) == twin and cell.key != twin.key


class _Context:
    def __init__(self, **fields):
        self.fields = fields
        self.options = fields.get("options", {})

    def variant(self, **changes):
        return _Context(**{**self.fields, **changes})


def test_each_cell_gets_its_bn_mode_and_32_views():
    s = _settings()
    context_of = memo_views.context_of(s, _Context(batch_size=7))
    by_bn = {c.options["bn"]: context_of(c) for c in memo_views.profile_cells(s)}
    assert by_bn["stored"].fields["options"]["memo"] == {"bn": "source", "n_augmentations": 32}
    assert by_bn["adapted"].fields["options"]["memo"] == {"bn": "batch", "n_augmentations": 32}
    assert s.methods.memo_augmentations != 32


def test_the_block_sets_32_views_beside_the_profiles_and_their_difference():
    s = _settings()
    base = {**{k: "" for k in SCHEMA}, "dataset": "cifar10c", "severity": 5, "n": 1000, "seed": 0, "shift": "lt",
            "shift_param": 100.0, "corruption": memo_views.CORRUPTIONS[0], "method": "memo"}
    rows = pd.DataFrame([{**base, "refiner": "none", "params": "bn=adapted", "accuracy": 55.0},
                         {**base, "refiner": "none", "params": "bn=adapted,views=32", "accuracy": 58.0},
                         {**base, "refiner": "dart", "params": "bn=adapted", "accuracy": 75.0}])[SCHEMA]
    table = memo_views.views_block(settings=s, rows=rows, outcomes={})
    line = table.loc[("MEMO (adapted BN)", "rho=100")]
    assert line["4 views"].startswith("55.00 ±") and line["32 views"].startswith("58.00 ±")
    assert line["32 views - 4 views"].startswith("3.00 ±")
    assert table.loc[("MEMO (adapted BN)+DART", "rho=100"), "32 views"] == "not run (0 of 1)"
    assert table.loc[("MEMO (stored BN)", "rho=1"), "4 views"] == "not run (0 of 1)"
