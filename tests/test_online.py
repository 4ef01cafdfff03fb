"""Notebook 11's online-imbalance grid, shared by the notebook and the sharded CLI."""

from dartlib import cli
from dartlib.studies.online_imbalance import ROW_ORDER, online_cells, profile_cells
from dartlib.experiments.settings import Settings
from dartlib.reporting.tables import row_label


def test_online_cells_cover_the_bnadapt_family_and_split_with_tta_methods():
    cells = online_cells(corrupted_dataset="cifar10c", severity=5, online_irs=[1, 20, 50, 5000], imb_subset_size=1000,
                         online_corruptions=["gaussian_noise", "fog"], split_tta_corruptions=["snow"], seed=3)
    # 2 corruptions x 4 IR x (NoAdapt, BNAdapt, +DART, +DART-split) + 1 x 4 x 3 methods x (none, +DART-split)
    assert len(cells) == 2 * 4 * 4 + 4 * 3 * 2 == len({c.key for c in cells})
    assert {c.params for c in cells} == {"subset=1000"} and {c.seed for c in cells} == {3}
    assert {row_label(c.method, c.refiner) for c in cells} == set(ROW_ORDER)
    assert not [c for c in cells if c.method in ("tent", "sar", "ods") and c.refiner == "dart"]


def test_profile_cells_read_notebook_11s_parameters():
    cpu = Settings.from_profile("cpu")
    assert len(profile_cells(cpu)) == 15 * 4 * 4 + 3 * 4 * 3 * 2
    assert len(profile_cells(Settings.from_profile("smoke"))) == 1 * 3 * 4 + 1 * 3 * 3 * 2


def test_cli_grid_knows_the_online_experiment(capsys):
    assert cli.main(["grid", "online_imbalance", "--shard", "0/0"]) == 2
    assert "shard" in capsys.readouterr().err
