"""Notebook 15's grid and tables: its baseline cells are Table 1's and the online grid's (same keys,
so their rows are borrowed), and its quantities carry their standard errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dartlib.dart.refiner import DartConfig
from dartlib.studies import diagnosis, online_imbalance, table1
from dartlib.experiments.settings import Settings
from dartlib.studies.diagnosis_report import diagnosis_table, failing_quantities, seed_table


def _params() -> Settings:
    return Settings.from_profile("cpu")


def test_baseline_cells_are_table1s_and_the_online_grids_so_their_rows_are_borrowed():
    params = _params()
    cells = diagnosis.diagnosis_cells(params, names=["table1", "alpha0", "seed1"])
    keys = {c.key for c in cells}
    lt_bnadapt = [c for c in table1.profile_cells(params) if c.method == "bnadapt" and c.refiner == "none"
                  and c.shift_param == 1.0]
    imb = [c for c in online_imbalance.profile_cells(params) if c.method in ("noadapt", "bnadapt") and c.refiner == "none"
           and c.shift_param in diagnosis.DIAGNOSIS_IRS]
    assert len(lt_bnadapt) == 15 and len(imb) == 90
    assert {c.key for c in lt_bnadapt + imb} <= keys
    seed1 = [c for c in cells if c.seed == 1]
    assert {c.refiner for c in seed1} == {"none", "seed1"}
    assert {(c.shift, c.shift_param) for c in seed1} == {("lt", 1.0), ("lt", 10.0), ("lt", 100.0), ("online-imb", 1.0),
                                                          ("online-imb", 20.0), ("online-imb", 50.0),
                                                          ("online-imb", 5000.0)}
    assert len(keys) == len(cells)


def test_unknown_variant_names_the_valid_ones():
    with pytest.raises(KeyError, match="unknown diagnosis variant 'alpha2'; valid: table1, epochs50"):
        diagnosis.variant("alpha2")


def test_every_variant_changes_one_factor_of_table1s_refiner_and_gets_its_own_file():
    from pathlib import Path

    from dartlib.dart.intermediate import refiner_path

    settings = Settings.from_profile("cpu")
    base = diagnosis.variant_config(settings=settings, name="table1")
    paths = {refiner_path(Path("m.pt"), diagnosis.variant_config(settings=settings, name=v.name)) for v in diagnosis.VARIANTS}
    assert len(paths) == len(diagnosis.VARIANTS)
    for v in diagnosis.VARIANTS:
        config = diagnosis.variant_config(settings=settings, name=v.name)
        changed = {f for f in v.overrides if getattr(config, f) != getattr(base, f)}
        assert changed == set(v.overrides), v.name
    assert (base.alpha, base.epochs, base.delta, base.n_dir, base.batch_size) == (30.0, 10, 10.0, 250, 64)


def _rows(refiner_acc: float, *, n: int = 10000) -> pd.DataFrame:
    rows = []
    for c in ("fog", "snow"):
        rows.append(dict(shift="lt", shift_param=1.0, method="bnadapt", refiner="none", corruption=c, accuracy=70.0))
        rows.append(dict(shift="lt", shift_param=1.0, method="bnadapt", refiner="table1", corruption=c,
                         accuracy=refiner_acc))
        for ir in diagnosis.DIAGNOSIS_IRS:
            rows.append(dict(shift="online-imb", shift_param=ir, method="noadapt", refiner="none", corruption=c,
                             accuracy=60.0))
            rows.append(dict(shift="online-imb", shift_param=ir, method="bnadapt", refiner="table1", corruption=c,
                             accuracy=50.0))
    frame = pd.DataFrame(rows)
    return frame.assign(dataset="cifar10c", severity=5, params="", seed=0, n=n)


def test_failing_quantities_without_outcomes_carry_an_upper_bound_se():
    q = failing_quantities(rows=_rows(69.0), refiner="table1")
    assert q["cost"].value == pytest.approx(-1.0) and q["cost"].kind == "bound"
    # two cells a side, each weighted 1/2: the sum of the four cells' binomial SEs over 2
    se = math.sqrt(69 * 31 / 10000) + math.sqrt(70 * 30 / 10000)
    assert q["cost"].se == pytest.approx(se)
    assert q["IR 5000"].value == pytest.approx(-10.0)
    table = diagnosis_table(rows=_rows(69.0))
    assert table.loc[0, "cost"] == f"-1.00 ± ≤{se:.2f}"


def test_seed_table_gives_mean_and_std_over_seeds_beside_the_papers():
    frames = []
    for name, seed, acc in (("table1", 0, 70.0), ("seed1", 1, 72.0), ("seed2", 2, 74.0)):
        f = _rows(acc)
        f = f.assign(seed=seed, refiner=f["refiner"].replace("table1", name))
        frames.append(f)
    table = seed_table(rows=pd.concat(frames), lt_rhos=[1], online_irs=[])
    row = table[table["method"] == "BNAdapt+DART"].iloc[0]
    assert (row["ours"], row["seeds"], row["paper"]) == (f"72.0 ± {pd.Series([70, 72, 74]).std(ddof=0):.1f}", 3,
                                                         "85.2 ± 0.1")
    # DART's effect seed by seed: each seed's refiner minus its BNAdapt (70.0): 0, +2, +4
    effect = table[table["method"] == "BNAdapt+DART − BNAdapt"].iloc[0]
    assert (effect["ours"], effect["seeds"], effect["paper"]) == (f"+2.0 ± {pd.Series([0, 2, 4]).std(ddof=0):.1f}", 3,
                                                                  "+0.0")


def test_shuffled_chunks_hold_the_same_images_in_another_order():
    import numpy as np

    from dartlib.data.protocols import dirichlet_stream

    labels = np.repeat(np.arange(10), 500)
    blocks = dirichlet_stream(labels, delta=10.0, n_chunks=25, seed=0)
    shuffled = dirichlet_stream(labels, delta=10.0, n_chunks=25, seed=0, shuffle_chunks=True)
    assert sorted(blocks) == sorted(shuffled) == list(range(5000))
    runs = lambda order: int((np.diff(labels[order]) != 0).sum())  # class changes along the stream
    assert runs(shuffled) > 5 * runs(blocks)
    chunk = 5000 // 25  # the chunks are cut the same: their first chunk holds the same images
    assert set(blocks[:150]) <= set(shuffled[:chunk + 60])


def test_the_batch_shapes_say_how_imbalanced_each_variants_intermediate_batches_are(monkeypatch):
    """Single-class chunks make one-class batches, shuffled chunks nearly balanced ones, and Table 1's
    class blocks lie between (10,000 labels, so N_dir 250 cuts chunks of 40 and N_dir 10 of 1,000)."""
    import numpy as np

    from dartlib.data import sources
    from dartlib.data.dataset import CIFAR10_CLASSES, Dataset

    labels = np.repeat(np.arange(10), 1000)
    monkeypatch.setattr(sources, "load", lambda name, split: Dataset(name, split, np.zeros((len(labels), 1, 1, 3), np.uint8),
                                                                     labels, CIFAR10_CLASSES))
    shapes = diagnosis.intermediate_batch_shapes(settings=_params(), names=["table1", "ndir10", "shuffled", "batch200",
                                                                             "mix-ndir10"], epochs=1).set_index("variant")
    assert shapes.loc["table1", "chunk"] == 40 and shapes.loc["ndir10", "chunk"] == 1000
    assert shapes.loc["ndir10", "largest_class_pct"] > 80 and shapes.loc["ndir10", "one_class_pct"] > 30
    assert shapes.loc["table1", "one_class_pct"] == 0
    assert shapes.loc["shuffled", "classes_per_batch"] > shapes.loc["table1", "classes_per_batch"]
    assert shapes.loc["ndir10", "largest_class_pct"] > shapes.loc["table1", "largest_class_pct"] > \
        shapes.loc["shuffled", "largest_class_pct"]
    assert shapes.loc["batch200", "steps_per_epoch"] == 10000 // 200 and shapes.loc["table1", "steps_per_epoch"] == 156
    # the mixture lies between its two kinds
    assert shapes.loc["table1", "largest_class_pct"] < shapes.loc["mix-ndir10", "largest_class_pct"] < \
        shapes.loc["ndir10", "largest_class_pct"]


def test_a_mixture_takes_every_other_batch_from_the_second_stream():
    import dataclasses

    import numpy as np

    from dartlib.dart.intermediate_batches import _imbalanced_batches

    labels = np.repeat(np.arange(10), 500)
    plain = DartConfig(n_dir=25)
    mixed, single = dataclasses.replace(plain, mix_n_dir=5), dataclasses.replace(plain, n_dir=5)
    a, b = _imbalanced_batches(labels, plain, 0, 20), _imbalanced_batches(labels, mixed, 0, 20)
    assert all(np.array_equal(x, y) for x, y in zip(a[::2], b[::2]))  # the paper's stream at even steps
    assert not any(np.array_equal(x, y) for x, y in zip(a[1::2], b[1::2]))
    one_class = lambda batches: np.mean([len(set(labels[x])) == 1 for x in batches])
    assert one_class(b[1::2]) > one_class(a[1::2])  # odd steps: batches of the 5-chunk stream
    assert one_class(_imbalanced_batches(labels, single, 0, 20)) > 0.3 > one_class(a)
    with pytest.raises(ValueError, match="mix_n_dir=-1"):
        DartConfig(mix_n_dir=-1)


def test_a_field_added_later_keeps_the_names_of_refiners_trained_before_it():
    from pathlib import Path

    from dartlib.dart.intermediate import refiner_path
    from dartlib.dart.refiner import DartConfig, config_dict

    assert "chunk_order" not in config_dict(DartConfig())
    assert config_dict(DartConfig(chunk_order="shuffled"))["chunk_order"] == "shuffled"
    config = diagnosis.variant_config(settings=Settings.from_profile("cpu"), name="table1")
    # the committed Table 1 refiner of the cpu profile (data/checkpoints/MANIFEST.json)
    assert refiner_path(Path("cifar10-resnet26-w16-cpu-seed0.pt"), config).name == \
        "cifar10-resnet26-w16-cpu-seed0.dart-a11600d3ac18.pt"


def test_every_registered_grid_names_an_existing_notebook_and_an_unknown_one_lists_them(capsys):
    from dartlib import cli
    from dartlib.studies.grids import GRIDS
    from dartlib.paths import NOTEBOOKS_DIR

    assert "diagnosis" in GRIDS and all((NOTEBOOKS_DIR / f"{s.notebook}.ipynb").is_file() for s in GRIDS.values())
    assert cli.main(["grid", "tabel1", "--profile", "smoke"]) == 2
    assert "unknown grid 'tabel1'; valid names: table1, note_report, online_imbalance" in capsys.readouterr().err


def test_every_grid_is_trained_prepared_and_cut_from_one_settings_object():
    """The one set-up contract (ARCHITECTURE.md): a grid's ``train_*`` and ``prepare_*`` take the
    profile's Settings as ``settings`` and no profile value by keyword; its cells are a function of them."""
    import inspect

    from dartlib.studies.grids import GRIDS

    settings = Settings.from_profile("cpu")
    for name, spec in GRIDS.items():
        for stage in (spec.train, spec.prepare):
            parameters = set(inspect.signature(stage).parameters)
            assert parameters - {"method_inputs", "with_refiner"} == {"settings", "device", "progress"}, (name, parameters)
        cells = spec.cells(settings)
        assert cells and all(c.dataset == settings.test.corrupted_dataset for c in cells), name
    # a value changed on the object reaches the cells: the seed of every stream
    assert {c.seed for c in GRIDS["table1"].cells(settings.replace(seed=3))} == {3}
    assert settings.replace(source_arch="resnet26-w8").checkpoint().name == "cifar10-resnet26-w8-cpu-seed0.pt"


def test_the_star_pairs_a_variant_with_table1_on_the_same_images():
    """A variant that flips the same few images as Table 1's refiner moves by 0 with SE 0 from it,
    however noisy the shared baseline; the unpaired star (baseline counted twice) would not."""
    from dartlib.experiments.outcomes import CellOutcomes
    from dartlib.studies.diagnosis_report import moved_from_table1

    rng = np.random.default_rng(0)
    rows, outcomes = [], {}
    base_hits = rng.random(1000) < 0.7
    for refiner, flip in (("none", 0), ("table1", 30), ("v", 30)):
        for corruption in ("fog", "snow"):
            hits = base_hits.copy()
            hits[:flip] = ~hits[:flip]
            o = CellOutcomes.from_stream(order=np.arange(1000), correct=hits, size=1000)
            key = f"{refiner}-{corruption}"
            rows.append(dict(method="bnadapt", refiner=refiner, shift="lt", shift_param=1.0, corruption=corruption,
                             dataset="cifar10c", severity=5, params="", seed=0, n=1000, accuracy=o.accuracy, key=key,
                             inputs="d"))
            outcomes[(key, "d")] = o
    frame = pd.DataFrame(rows)
    moved = moved_from_table1(rows=frame, refiner="v", outcomes=outcomes)["cost"]
    assert moved.value == 0.0 and moved.se == 0.0 and moved.kind == "images"
    cost = failing_quantities(rows=frame, refiner="v", outcomes=outcomes)["cost"]
    # paired: only the 30 flipped images vary between DART and BNAdapt
    assert cost.kind == "images" and 0 < cost.se < 0.5 * math.sqrt(2) * math.sqrt(70 * 30 / 1000)


def test_the_papers_g_phi_is_stated_once_and_its_refiners_are_named_after_it():
    """PAPER_CIFAR10 is Appendix A's configuration; the paper profile's g_phi and notebook 15's paper
    variants (their names included, which the committed rows and refiner files carry) derive from it."""
    from dartlib.book.claims import PAPER_CONFIG
    from dartlib.dart.refiner import PAPER_CIFAR10
    from dartlib.studies.diagnosis import PAPER_VARIANT, SEED_GROUPS, variant_config
    from dartlib.studies.paper_config import PAPER

    assert (PAPER_CIFAR10.alpha, PAPER_CIFAR10.epochs, PAPER_CIFAR10.delta, PAPER_CIFAR10.n_dir,
            PAPER_CIFAR10.batch_size, PAPER_CIFAR10.hidden, PAPER_CIFAR10.lr) == (0.1, 50, 10.0, 250, 64, 1000, 1e-3)
    assert PAPER == PAPER_VARIANT == "alpha0.1-epochs50" and PAPER_CONFIG == "g_phi 50 epochs at alpha 0.1"
    assert SEED_GROUPS["paper"] == ("alpha0.1-epochs50", "alpha0.1-epochs50-seed1", "alpha0.1-epochs50-seed2")
    cpu = Settings.from_profile("cpu")
    for seed, name in enumerate(SEED_GROUPS["paper"]):
        config = variant_config(settings=cpu, name=name)
        assert (config.alpha, config.epochs, config.seed) == (PAPER_CIFAR10.alpha, PAPER_CIFAR10.epochs, seed)
    assert cpu.dart_config() == PAPER_CIFAR10  # the cpu profile's own g_phi is the paper's
