"""The paper-configuration refiners of notebooks 07 and 08: 50 epochs at alpha 0.1 unless a table
varies the setting, grouped into passes that share their intermediate batches, each config once."""

from __future__ import annotations

from dartlib.dart.intermediate_batches import stream_signature
from dartlib.experiments.settings import Settings
from dartlib.studies.paper_refiners import PASS_ORDER, paper_table_refiners


def test_every_refiner_is_the_papers_except_the_setting_its_table_varies():
    passes = paper_table_refiners(settings=Settings.from_profile("cpu"))
    assert list(passes) == list(PASS_ORDER)
    assert {k: len(v) for k, v in passes.items()} == {"batch64": 18, "unif-lt": 1, "batch32": 8, "batch128": 8}
    configs = [c for p in passes.values() for c in p.values()]
    assert len(set(configs)) == len(configs)  # each config once
    for name, group in passes.items():
        assert len({stream_signature(c) for c in group.values()}) == 1, name  # one pass each
    for name, config in passes["batch64"].items():
        if "alpha=" not in name:
            assert config.alpha == 0.1, name
        if "epochs=" not in name:
            assert config.epochs == 50, name
    main = passes["batch64"]["ablation dart"]
    assert (main.alpha, main.epochs, main.n_dir, main.hidden) == (0.1, 50, 250, 1000)
    # equal optimiser steps: batch 32 for 25 epochs, batch 128 for 100
    assert passes["batch32"]["sensitivity equal_steps_batch=32;hidden=1000"].epochs == 25
    assert passes["batch128"]["sensitivity equal_steps_batch=128;hidden=1000"].epochs == 100
