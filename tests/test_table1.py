"""Table 1 cells on a tiny model and a tiny corrupted set in the CIFAR-C layout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.experiments.grid import run_grid
from dartlib.models.backbones import small_cnn
from dartlib.experiments.engine import TestTimeContext, evaluate_cell
from dartlib.experiments.settings import Settings
from dartlib.studies import table1
from dartlib.studies.table1 import TABLE1_METHODS, table1_cells
from dartlib.tta.note import to_iabn


def test_cells_cover_every_method_with_and_without_dart():
    cells = table1_cells(dataset="cifar10c", corruptions=["fog"], rhos=[1, 100])
    assert len(cells) == 2 * (2 * len(TABLE1_METHODS) - 1)
    assert not [c for c in cells if c.method == "noadapt" and c.refiner == "dart"]


def test_every_table1_method_runs_with_and_without_dart(tiny_corrupted, tmp_path):
    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    refiner = Refiner(module=RefinementModule(10, hidden=8), config=DartConfig())
    context = TestTimeContext(source=source, refiner=refiner, trained={"iabn": to_iabn(source)}, batch_size=40,
                            options={"memo": {"n_augmentations": 2}})
    cells = table1_cells(dataset="fmnistc", corruptions=["gaussian_noise"], rhos=[10])
    path = tmp_path / "table1.csv"
    results = run_grid(cells, lambda c: evaluate_cell(c, context), path=path, experiment="table1", progress=False)
    assert len(results) == len(cells) and results.accuracy.between(0, 100).all()
    # the untrained residual refiner is the identity: every method scores exactly as without DART
    pivot = results.pivot_table(index="method", columns="refiner", values="accuracy")
    with_dart = pivot.dropna()
    assert (with_dart["dart"] == with_dart["none"]).all()
    n = results.n.unique()
    assert len(n) == 1 and n[0] < 10 * 60  # an LT subset of the stream


def test_stream_limit_keeps_the_first_images_of_the_lt_order():
    from dartlib.experiments.cell_streams import stream_order

    labels = np.repeat(np.arange(10), 100)
    full, limited = (stream_order(labels, c) for c in
                     (table1_cells(dataset="x", corruptions=["fog"], rhos=[10], methods=["bnadapt"], limit=n)[0] for n in (0, 50)))
    assert len(limited) == 50 and np.array_equal(limited, full[:50]) and len(full) > 50


def test_unknown_refiner_names_are_refused():
    from dartlib.experiments.grid import Cell

    context = TestTimeContext(source=small_cnn(10, width=4).eval(), refiner=None)
    cell = Cell(dataset="x", shift="lt", shift_param=1.0, corruption="fog", severity=5, method="bnadapt", refiner="dart")
    with pytest.raises(ValueError, match="no refiner 'dart' in this context; valid: none"):
        context.adapter(cell)


def test_shared_source_logits_change_no_prediction(tiny_corrupted):
    """The memoised f_theta0_bar gives every method with DART (and ODS's tracker) exactly the
    predictions of a fresh frozen copy per cell."""
    from dartlib.experiments.cell_streams import cell_stream
    from dartlib.models.streams import TestStream, stream_predictions

    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    module = RefinementModule(10, hidden=8)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.3)  # far from the identity, so the refinement matters
    refiner = Refiner(module=module, config=DartConfig())
    contexts = {share: TestTimeContext(source=source, refiner=refiner, trained={"iabn": to_iabn(source)}, batch_size=40,
                                     options={"memo": {"n_augmentations": 2}}, share_source=share)
                for share in (False, True)}
    cells = [c for c in table1_cells(dataset="fmnistc", corruptions=["gaussian_noise"], rhos=[10],
                                     methods=[*TABLE1_METHODS, "memo", "roid"])
             if c.refiner == "dart" or c.method == "ods"]
    changed = 0
    for cell in cells:
        images, labels, order = cell_stream(cell)
        stream = TestStream(images=images, order=order, batch_size=40)
        preds = {}
        for share, context in contexts.items():
            torch.manual_seed(cell.seed)
            preds[share] = stream_predictions(context.adapter(cell), stream)
        assert np.array_equal(preds[False], preds[True]), cell.label()
        if cell.refiner == "dart":
            torch.manual_seed(cell.seed)
            plain = stream_predictions(contexts[True].adapter(cell.__class__(**{**cell.__dict__, "refiner": "none"})),
                                       stream)
            changed += int(not np.array_equal(plain, preds[True]))
    assert contexts[True]._shared.hits > 0
    assert changed >= 5  # the refiner is not the identity, so the comparison above is not vacuous


def test_stream_protocols_of_the_appendix_tables():
    from dartlib.experiments.grid import Cell
    from dartlib.experiments.cell_streams import stream_order

    labels = np.repeat(np.arange(10), 100)

    def order(shift, param, params=""):
        return stream_order(labels, Cell(dataset="x", shift=shift, shift_param=param, corruption="fog", severity=5,
                                         method="bnadapt", params=params))

    assert sorted(order("none", None)) == list(range(1000))
    imb = order("online-imb", 50.0)
    assert len(imb) == 1000 and np.bincount(labels[imb[:100]]).max() > 80  # 50 / (50 + 9) of each subset
    assert len(order("online-imb", 50.0, "subset=20")) == 200
    non_iid = order("dirichlet", 0.1)
    assert sorted(non_iid) == list(range(1000))
    # non-i.i.d.: consecutive batches of 50 hold few classes (an i.i.d. batch holds about all 10)
    assert np.mean([len(np.unique(labels[non_iid[i:i + 50]])) for i in range(0, 1000, 50)]) < 5
    with pytest.raises(ValueError, match="valid: lt, none, natural, online-imb, dirichlet"):
        order("gradual", 1.0)


def test_mixed_stream_pools_every_corruption(tmp_path, monkeypatch):
    from dartlib.data import corrupted_sets
    from dartlib.data.corruptions import CORRUPTIONS
    from dartlib.experiments.grid import Cell
    from dartlib.experiments.cell_streams import cell_stream

    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    folder = corrupted_sets.corrupted_dir("fmnistc")
    folder.mkdir(parents=True)
    labels = np.repeat(np.arange(10), 3).astype(np.int64)
    for i, corruption in enumerate(CORRUPTIONS):  # each corruption's images hold its index
        np.save(folder / f"{corruption}.npy", np.full((5 * len(labels), 32, 32, 3), i, dtype=np.uint8))
    np.save(folder / "labels.npy", np.tile(labels, 5))
    cell = Cell(dataset="fmnistc", shift="none", shift_param=None, corruption="mixed", severity=5, method="bnadapt")
    images, pooled, order = cell_stream(cell)
    assert len(images) == 15 * 30 and sorted(np.unique(images[:, 0, 0, 0])) == list(range(15))
    assert len(order) == 15 * 30
    images, pooled, order = cell_stream(Cell(**{**cell.__dict__, "params": "pool=60"}))
    assert len(images) == len(pooled) == len(order) == 60


def test_cifar10_1_lt_cells_run_from_the_release_layout(tmp_path, monkeypatch):
    """CIFAR-10.1-LT (Table 1's natural-shift column): the npy release layout, LT streams, +-DART."""
    from dartlib.experiments.grid import run_grid

    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    folder = tmp_path / "CIFAR-10.1"
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.save(folder / "cifar10.1_v6_data.npy", rng.integers(0, 255, size=(200, 32, 32, 3), dtype=np.uint8))
    np.save(folder / "cifar10.1_v6_labels.npy", np.repeat(np.arange(10), 20))
    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    context = TestTimeContext(source=source, refiner=Refiner(module=RefinementModule(10, hidden=8), config=DartConfig()),
                            batch_size=50)
    cells = table1_cells(dataset="cifar10.1", corruptions=["clean"], rhos=[1, 10], methods=["noadapt", "bnadapt", "tent"])
    results = run_grid(cells, lambda c: evaluate_cell(c, context), path=tmp_path / "natural.csv", experiment="natural",
                       progress=False)
    assert len(results) == len(cells) == 10
    assert results.n.max() == 200 and results.n.min() < 120  # rho = 1 keeps all; rho = 10 an LT subset


def test_cell_inputs_follow_the_refiner_a_cell_uses():
    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    trained = RefinementModule(10, hidden=8)
    context = TestTimeContext(source=source, refiner=Refiner(module=trained, config=DartConfig()))
    other = TestTimeContext(source=source, refiner=Refiner(module=RefinementModule(10, hidden=8), config=DartConfig()))
    with torch.no_grad():
        next(other.refiner.module.parameters()).add_(1.0)
    plain, with_dart = table1_cells(dataset="fmnistc", corruptions=["fog"], rhos=[1], methods=["tent"])
    assert context.inputs(plain) == other.inputs(plain)  # no refiner read: same inputs
    assert context.inputs(with_dart) != other.inputs(with_dart)
    alpha = TestTimeContext(source=source, refiner=Refiner(module=trained, config=DartConfig(alpha=1.0)))
    assert alpha.inputs(with_dart) != context.inputs(with_dart)  # the settings count too
    assert context.inputs(with_dart) == context.inputs(with_dart)


def test_status_context_loads_trained_inputs_and_computes_nothing(monkeypatch, tmp_path):
    """Preparing a context (what ``grid --status`` does alone): the committed smoke models load,
    nothing is generated and nothing trains; only the cells' test sets are read (their digest is
    part of a cell's)."""
    from dartlib.experiments import engine as table1

    def forbidden(*args, **kwargs):
        raise AssertionError("status must not load, generate or train anything")

    p = Settings.from_profile("smoke")
    monkeypatch.setattr("dartlib.data.prepare.ensure_corrupted", forbidden)
    monkeypatch.setattr("dartlib.models.training.train_source", forbidden)
    monkeypatch.setattr("dartlib.dart.refiner_training.train_refiners", forbidden)
    context, meta = table1.prepare_context(settings=p, device="cpu")
    from dartlib.studies.table1 import profile_cells

    cell = profile_cells(p)[1]
    labels = np.repeat(np.arange(10), 12).astype(np.int64)  # a tiny test set in the CIFAR-C layout
    np.save(tmp_path / f"{cell.corruption}.npy", np.zeros((5 * len(labels), 32, 32, 3), dtype=np.uint8))
    np.save(tmp_path / "labels.npy", np.tile(labels, 5))
    monkeypatch.setenv("DART_FMNISTC_DIR", str(tmp_path))
    assert meta["arch"] == "small-cnn" and context.refiner is not None and context.trained["iabn"] is not None
    assert len(context.inputs(cell)) == 16


def test_status_context_names_a_missing_trained_input(tmp_path, monkeypatch):
    from dartlib.experiments import engine as table1

    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"fmnist-small-cnn-smoke-seed0\.pt.*`python -m dartlib train --profile smoke` trains"):
        table1.prepare_context(settings=Settings.from_profile("smoke"), device="cpu")


def test_grid_status_names_the_grid_command_that_trains_a_missing_input(tmp_path, monkeypatch, capsys):
    from dartlib.cli import main

    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    assert main(["grid", "table1", "--profile", "smoke", "--status"]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "fmnist-small-cnn-smoke-seed0.pt" in err
    assert "`python -m dartlib grid table1 --profile smoke` trains them" in err


def test_note_report_cells_are_table1s_note_dart_cells_with_the_other_reading():
    from dartlib.studies.table1 import note_report_cells, table1_cells

    cells = table1_cells(dataset="fmnistc", corruptions=["gaussian_noise", "snow"], rhos=[1, 100], limit=600)
    other = note_report_cells(cells)
    assert len(other) == 4 and {(c.method, c.refiner) for c in other} == {("note", "dart")}
    assert all(c.options == {"limit": 600, "dart_use": "report"} for c in other)
    assert not {c.key for c in other} & {c.key for c in cells}  # their own rows, never Table 1's


def test_the_pages_table1_block_gives_ours_over_the_papers_and_gains_from_unrounded_means():
    """docs/results.md's Table 1 (generated): each cell "ours / paper", DART's gain from the unrounded
    means (a gain from the rounded ones would read 0.9 + 0.1), NOTE+DART's other reading after it."""
    def rows(method, refiner, accuracies):
        return [dict(method=method, refiner=refiner, shift_param=rho, corruption=c, accuracy=a)
                for rho, a in zip((1.0, 10.0, 100.0), accuracies) for c in ("fog", "snow")]

    results = pd.DataFrame(rows("noadapt", "none", (60.0, 58.0, 57.0)) + rows("note", "none", (70.04, 68.0, 66.0))
                           + rows("note", "dart", (70.96, 68.0, 67.0)))
    report = pd.DataFrame(rows("note", "dart", (70.0, 71.0, 75.0)))
    block = table1.beside_paper_block(results=results, report_rows=report, methods=("noadapt", "note"),
                                      corruptions=("fog", "snow"))
    assert list(block.index) == ["NoAdapt", "NOTE", "NOTE+DART", "NOTE+DART (report)"]
    assert block.loc["NOTE", "rho = 1"] == "70.0 / 81.8" and block.loc["NOTE+DART", "rho = 1"] == "71.0 / 81.6"
    gains = "DART gain at rho = 1; 10; 100, ours / paper"
    assert block.loc["NOTE+DART", gains] == "+0.9 / -0.2; +0.0 / +0.8; +1.0 / +2.4"
    assert block.loc["NOTE+DART (report)", gains] == "+0.0 / -0.2; +3.0 / +0.8; +9.0 / +2.4"  # -0.04 reads +0.0
    assert block.loc["NoAdapt", gains] == "" and block.loc["NOTE", gains] == ""
    # a mean over fewer corruptions than the table's is not set beside the paper, nor is a gain from it
    part = table1.beside_paper_block(results=results[~((results.method == "note") & (results.refiner == "none")
                                                       & (results.corruption == "snow") & (results.shift_param == 10.0))],
                                     report_rows=report, methods=("noadapt", "note"), corruptions=("fog", "snow"))
    assert part.loc["NOTE", "rho = 10"] == "not run (1 of 2)" and part.loc["NOTE", "rho = 1"] == "70.0 / 81.8"
    assert part.loc["NOTE+DART", gains] == "+0.9 / -0.2; not run (1 of 2); +1.0 / +2.4"


def test_each_studys_tables_are_built_once_by_its_report():
    """The notebooks, the results page and the book take each study's tables from its report
    (``table1.report``, ``paper_config.report``, ``diagnosis_report.report``, ``ablations.report``,
    ``sensitivity.report``, ``appendix_settings.report``, ``all_corruptions.report``,
    ``memo_views.report``, ``backbone_strength.report``, ``online_imbalance.report``,
    ``costs.report``, ``hoc.report``): no other module or notebook builds them from
    the rows (the functions below are the reports')."""
    import re

    from dartlib.paths import REPO_ROOT

    builders = {"table1.py": ("accuracy_by_row", "dart_gain", "beside_paper_block", "note_readings"),
                "paper_config.py": ("bnadapt_block", "accuracy_block", "every_method_block", "gain_beside_paper_block",
                                    "imb_block"),
                "diagnosis_report.py": ("diagnosis_table", "batch_shape_table", "seed_table", "heldout_stream_table",
                                        "diagnosis_figure"),
                "ablations.py": ("mean_accuracy", "ablation_tables", "gains_beside_shortcut", "plot_variant_gains"),
                "sensitivity.py": ("alpha_table", "hyper_table", "equal_steps_table", "epochs_table", "epochs_imb_table",
                                   "batch_size_table", "plot_sensitivity"),
                "appendix_settings.py": ("online_imbalance_table", "mixed_table", "memo_table", "condensed_table",
                                         "plot_more_settings"),
                "all_corruptions.py": ("all_corruptions_block", "sensitivity_block"),
                "memo_views.py": ("views_block",),
                "backbone_strength.py": ("study_table", "trend", "cross_device", "plot_study"),
                "online_imbalance.py": ("online_table", "plot_online_imbalance"),
                "costs.py": ("costs_beside_paper",),
                "hoc.py": ("plot_tsne", "plot_transitions")}
    found = []
    for home, names in builders.items():
        modules = "|".join(name.removesuffix(".py") for name in builders)
        called = re.compile(r"(?<![\w.])(?:(?:" + modules + r")\.)?(" + "|".join(names) + r")\(")
        for path in [*(REPO_ROOT / "dartlib").rglob("*.py"), *(REPO_ROOT / "notebooks").glob("*.ipynb")]:
            if path.name != home:
                found += [f"{path.name}: {m.group(0)}" for m in called.finditer(path.read_text())]
    assert found == []


def test_the_report_of_the_committed_cpu_rows_is_their_mean_per_row_and_dart_gain():
    from dartlib.studies import table1

    settings = Settings.from_profile("cpu")
    rows = table1.stored(settings=settings)
    assert len(rows.results) == len(table1.profile_cells(settings)) == 765 and len(rows.note_report) == 45
    report = table1.report(settings=settings, rows=rows)
    assert report.order[:3] == ["NoAdapt", "BNAdapt", "BNAdapt+DART"]
    tent = rows.results[(rows.results.method == "tent") & (rows.results.shift_param == 10)]
    with_dart, without = (tent[tent.refiner == r].accuracy.mean() for r in ("dart", "none"))
    assert report.ours.loc["TENT", "rho=10"] == pytest.approx(without)
    assert report.gain.loc["TENT", "rho=10"] == pytest.approx(with_dart - without)
    assert report.paper_gain.loc["TENT", "rho=10"] == pytest.approx(report.paper.loc["TENT+DART", "rho=10"]
                                                                    - report.paper.loc["TENT", "rho=10"])
    assert list(report.note_readings().index)[:3] == ["NOTE", "NOTE+DART (memory; Table 1)", "NOTE+DART (report)"]
