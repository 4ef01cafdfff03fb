"""Notebook 08's equal-steps controls (dartlib.studies.sensitivity): every intermediate batch size
trained for the default's optimiser steps, named apart from the fixed-epoch refiners, and their
table's gains and differences from the default."""

import pandas as pd
import pytest

from dartlib.book.claim_readings import _settings_match
from dartlib.experiments.cell_options import cell_options
from dartlib.experiments.settings import Settings
from dartlib.studies import sensitivity
from dartlib.studies.ablations import ablation_base_config

D_INT = 50_000  # any size: steps per epoch are D_int / batch


def test_equal_steps_controls_take_the_defaults_optimiser_steps():
    settings = Settings.from_profile("cpu")
    base = ablation_base_config(settings)
    changes = sensitivity.equal_steps_changes(settings)
    assert len(changes) == 2 * 4  # batches 32 and 128, four widths each
    default_steps = base.epochs * D_INT / base.batch_size
    for name, change in changes.items():
        assert change["epochs"] * D_INT / change["batch_size"] == default_steps, name
        assert cell_options(name) == {"equal_steps_batch": change["batch_size"], "hidden": change["hidden"]}
    assert {c["epochs"] for c in changes.values()} == {25, 100}  # batch 32 and 128 for the 50 epochs of batch 64
    assert changes.items() <= sensitivity.refiner_changes(settings).items()
    # the fixed-epoch table and its checks never read a control's rows
    assert not any(name.startswith("int_batch=") for name in changes)
    assert not _settings_match("equal_steps_batch=32;hidden=250", cell_options("int_batch=32;hidden=250"), baseline=False)


def test_a_profile_without_whole_equal_step_epochs_is_refused_naming_its_file():
    smoke = Settings.from_profile("smoke")
    assert sensitivity.equal_steps_changes(smoke) == {}
    with pytest.raises(ValueError, match=r"notebooks/profiles/smoke.yaml: .*3 x batch 32 / int_batch_size 64 = 1.5"):
        sensitivity.equal_steps_changes(smoke.replace(hyper_equal_steps=True))


def _row(refiner: str, params: str, rho: float, accuracy: float, corruption: str) -> dict:
    return dict(experiment="sensitivity", dataset="cifar10c", shift="lt", shift_param=rho, corruption=corruption,
                severity=5, method="bnadapt", refiner=refiner, params=params, seed=0, n=10000, accuracy=accuracy,
                key=f"{refiner}{params}{rho}{corruption}", inputs="x")


def test_the_equal_steps_table_gives_each_gain_and_its_difference_from_the_default(capsys):
    settings = Settings.from_profile("cpu").replace(hyper_int_batches=[32, 64], hyper_hidden=[1000], lt_rhos=[1, 10])
    rows = []
    for corruption, shift in (("fog", 0.0), ("snow", 2.0)):
        rows += [_row("none", "", 10, 70.0 + shift, corruption),
                 _row("dart", "int_batch=64;hidden=1000", 10, 76.0 + shift, corruption),
                 _row("dart", "equal_steps_batch=32;hidden=1000", 10, 73.0 + 2 * shift, corruption)]
    frame = pd.DataFrame(rows)
    hyper = frame[frame.params != "equal_steps_batch=32;hidden=1000"]
    equal = frame[frame.params != "int_batch=64;hidden=1000"]
    table = sensitivity.equal_steps_table(hyper_frame=hyper, equal_frame=equal, settings=settings)
    # gains: batch 64 (6 + 6) / 2 = 6; batch 32 (3 + 5) / 2 = 4, minus the default's: -2
    row = table.loc["hidden 1000, rho=10"]
    assert row["batch 64 (50 ep.): gain"].startswith("+6.00 ± ≤")
    assert row["batch 32 (25 ep.): gain"].startswith("+4.00 ± ≤")
    assert row["batch 32: minus default"].startswith("-2.00 ± ≤")
    assert row["batch 64: minus default"].startswith("+0.00")
    assert "equal optimiser steps" in capsys.readouterr().out


def test_the_equal_steps_table_says_when_a_profile_runs_none(capsys):
    table = sensitivity.equal_steps_table(hyper_frame=pd.DataFrame(), equal_frame=pd.DataFrame(),
                                          settings=Settings.from_profile("smoke"))
    assert table.empty and "not run on the smoke profile (hyper_equal_steps: false)" in capsys.readouterr().out
