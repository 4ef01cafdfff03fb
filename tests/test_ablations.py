"""The DART variants of the ablation tables and their evaluation on pre-computed streams."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.studies.ablations import VARIANTS, bnadapt_streams, refined_accuracy, stream_order, variant_config
from dartlib.dart.refiner import DartConfig
from dartlib.data.dataset import Dataset
from dartlib.dart.refiner_training import train_refiner
from dartlib.models.backbones import small_cnn
from dartlib.experiments.engine import TestTimeContext, run_cells
from dartlib.experiments.grid import grid
from dartlib.registry import UnknownNameError


def test_every_variant_is_one_named_change_of_the_config():
    base = DartConfig(epochs=3, hidden=32)
    assert variant_config("dart", base) == base
    changed = {name: {k for k in vars(base) if getattr(variant_config(name, base), k) != getattr(base, k)}
               for name in VARIANTS if name != "dart"}
    assert all(len(keys) == 1 for keys in changed.values()), changed
    assert variant_config("dart-additive", base).outputs == "additive"
    with pytest.raises(UnknownNameError, match="valid names: dart, dart-pbar-only"):
        variant_config("dart-xl", base)


def test_online_imbalance_order_has_k_subsets_with_one_majority_each():
    labels = np.repeat(np.arange(10), 100)
    order = stream_order(labels, shift="online-imb", shift_param=50.0, seed=0)
    assert len(order) == 1000
    majors = [np.bincount(labels[order[i * 100:(i + 1) * 100]], minlength=10).argmax() for i in range(10)]
    assert sorted(majors) == list(range(10))
    assert len(stream_order(labels, shift="online-imb", shift_param=50.0, seed=0, subset_size=20)) == 200
    with pytest.raises(ValueError, match="valid: lt, online-imb"):
        stream_order(labels, shift="dirichlet", shift_param=1.0, seed=0)


def test_every_variant_trains_and_refines_the_shared_streams(tiny_corrupted):
    torch.manual_seed(0)
    model = small_cnn(10, width=4).eval()
    rng = np.random.default_rng(1)
    train = Dataset("fmnist", "train", rng.integers(0, 255, size=(400, 32, 32, 3), dtype=np.uint8),
                    np.repeat(np.arange(10), 40).astype(np.int64), tuple(str(i) for i in range(10)))
    base = DartConfig(epochs=1, hidden=16, n_dir=4, batch_size=16)
    streams = bnadapt_streams(model, dataset="fmnistc", corruptions=["gaussian_noise"],
                              shifts={"lt": [1.0, 10.0], "online-imb": [20.0]}, batch_size=50, subset_size=20)
    assert [(s.shift, s.shift_param) for s in streams] == [("lt", 1.0), ("lt", 10.0), ("online-imb", 20.0)]
    assert len(streams[2].labels) == 200 and streams[0].features[0].shape[0] == 50
    # the logits are the head of the stored features (the additive variant refines the features)
    assert torch.allclose(streams[0].logits[0], model.head(streams[0].features[0]), atol=1e-5)
    refiners = {name: train_refiner(model, train, variant_config(name, base), progress=False, max_steps=3)[0]
                for name in VARIANTS}
    accuracies = [refined_accuracy(s, refiners.get(name)) for s in streams for name in ["none", *VARIANTS]]
    assert len(accuracies) == 3 * (len(VARIANTS) + 1) and all(0 <= a <= 100 for a in accuracies)
    # an untrained residual refiner is the identity: BNAdapt + it == BNAdapt, stream by stream
    identity = train_refiner(model, train, replace(base, epochs=1), progress=False, max_steps=0)[0]
    for stream in streams:
        assert refined_accuracy(stream, identity) == refined_accuracy(stream, None)


def test_the_engines_cells_give_the_shared_streams_numbers_for_every_variant(tiny_corrupted, tmp_path):
    """Notebook 07's cells run through the engine (keyed rows, f_theta0_bar shared) give, variant
    by variant and stream by stream, the accuracies of the precomputed-stream path, the additive
    variant (which refines the penultimate features) included."""
    torch.manual_seed(0)
    model = small_cnn(10, width=4).eval()
    with torch.no_grad():  # an untrained net predicts one class; these weights make it predict several
        model.head.bias.zero_()
        model.head.weight.mul_(20)
    rng = np.random.default_rng(1)
    train = Dataset("fmnist", "train", rng.integers(0, 255, size=(400, 32, 32, 3), dtype=np.uint8),
                    np.repeat(np.arange(10), 40).astype(np.int64), tuple(str(i) for i in range(10)))
    base = DartConfig(epochs=1, hidden=16, n_dir=4, batch_size=16)
    refiners = {name: train_refiner(model, train, variant_config(name, base), progress=False, max_steps=3)[0]
                for name in VARIANTS}
    with torch.no_grad():  # g_phi pushed away from the identity, so that every variant moves predictions
        for refiner in refiners.values():
            for p in refiner.module.parameters():
                p.add_(torch.randn_like(p) * 0.5)
    streams = bnadapt_streams(model, dataset="fmnistc", corruptions=["gaussian_noise"],
                              shifts={"lt": [10.0], "online-imb": [20.0]}, batch_size=50, subset_size=20)
    direct = [(name, refined_accuracy(s, refiners.get(name))) for s in streams for name in ["none", *VARIANTS]]
    cells = (grid(dataset=["fmnistc"], shift=["lt"], shift_param=[10.0], corruption=["gaussian_noise"], severity=[5],
                  method=["bnadapt"], refiner=["none", *VARIANTS])
             + grid(dataset=["fmnistc"], shift=["online-imb"], shift_param=[20.0], corruption=["gaussian_noise"],
                    severity=[5], method=["bnadapt"], refiner=["none", *VARIANTS], params=["subset=20"]))
    context = TestTimeContext(source=model, refiner=None, refiners=refiners, batch_size=50, device="cpu")
    rows = run_cells(cells, context, path=tmp_path / "ablations.csv", experiment="t", progress=False)
    assert list(rows.refiner) == [name for name, _ in direct] and len(rows) == 2 * (len(VARIANTS) + 1)
    # rows are stored with 4 decimals; one image of these streams is 0.4 points or more
    np.testing.assert_allclose(rows.accuracy.to_numpy(float), [a for _, a in direct], atol=1e-4)
    additive = rows[rows.refiner == "dart-additive"].accuracy.to_numpy(float)
    assert (np.abs(additive - rows[rows.refiner == "none"].accuracy.to_numpy(float)) > 1).any()
    assert rows.accuracy.nunique() > 8  # the variants differ: a refiner left out or mixed up would show


def test_each_variant_gain_is_printed_beside_the_former_shortcut_from_the_committed_rows():
    """cpu: the former 2-epoch rows (results/cpu/shortcut/) beside the profile's own; the former
    column is the paired gain of those rows, the change is paired too; smoke keeps none."""
    from pathlib import Path

    from dartlib.analysis.noise import difference
    from dartlib.experiments.grid import read_results
    from dartlib.experiments.outcomes import checked_outcomes
    from dartlib.experiments.settings import Settings
    from dartlib.studies.ablations import gains_beside_shortcut, stream_column

    assert gains_beside_shortcut(results=pd.DataFrame(), settings=Settings.from_profile("smoke")) is None
    settings = Settings.from_profile("cpu")
    own = read_results(Path("results/cpu/ablations.csv"))
    former_path = Path("results/cpu/shortcut/ablations.csv")
    former = read_results(former_path)
    table = gains_beside_shortcut(results=own.assign(column=stream_column(own)), settings=settings)
    assert list(table.columns) == ["variant", "stream", "2 epochs, alpha 10", "50 epochs, alpha 0.1", "change", "paper"]
    assert len(table) == 7 * 7 and set(table.variant) == set(VARIANTS)
    pick = (former["shift"] == "lt") & (former.shift_param == 100)
    expected = difference(former[pick & (former.refiner == "dart")], former[pick & (former.refiner == "none")],
                          outcomes=checked_outcomes(former, former_path))
    row = table[(table.variant == "dart") & (table.stream == "LT 100")].iloc[0]
    assert row["2 epochs, alpha 10"] == expected.text() and row["paper"] == "+18.1"
    assert "not run" not in set(table["50 epochs, alpha 0.1"]) and all(table.change.str.contains("±"))
