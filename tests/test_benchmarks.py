"""The large-scale and natural-shift benchmarks driven end to end on tiny fixtures written in each
dataset's real layout: CIFAR-100 image folders + the CIFAR-100-C npy release, ImageNet class
folders + ImageNet-C <corruption>/<severity>/<wnid>/, and PACS / OfficeHome / DomainNet-126 domain
folders. Small CNNs and a few intermediate steps stand in for the paper's backbones and epochs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from dartlib.studies import large_benchmarks
from dartlib.studies.large_benchmarks import (BENCHMARKS, Overrides, benchmark_cells, missing_data, prepare, run_benchmark,
                                              scenarios)
from dartlib.data.sources import DOMAIN_FOLDERS
from dartlib.experiments.grid import read_results
from dartlib.models.backbones import small_cnn
from dartlib.registry import UnknownNameError
from dartlib.models.checkpoints import checkpoint_path, save_source

TINY_DART = {"epochs": 1, "n_dir": 4, "hidden": 16, "batch_size": 16}


@pytest.fixture()
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    for var in ("DART_CIFAR100_DIR", "DART_CIFAR100C_DIR", "DART_IMAGENET_DIR", "DART_IMAGENETC_DIR", "DART_PACS_DIR",
                "DART_OFFICEHOME_DIR", "DART_DOMAINNET126_DIR"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _write_images(folder, n, rng, *, size=(32, 32), suffix=".png", shade=None):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
        if shade is not None:  # a class-dependent tint, so a model can learn something
            pixels[..., shade % 3] = 200
        Image.fromarray(pixels).save(folder / f"img{i:03d}{suffix}")


def test_registry_has_the_papers_settings():
    assert set(BENCHMARKS) == {"cifar100c-imb", "imagenet-c-imb", "pacs", "officehome", "domainnet126"}
    c100, inet = BENCHMARKS["cifar100c-imb"], BENCHMARKS["imagenet-c-imb"]
    assert c100.shift_params == (1.0, 200.0, 500.0, 50000.0) and inet.shift_params == (1.0, 1000.0, 5000.0, 500000.0)
    assert (c100.dart["delta"], c100.dart["n_dir"], c100.dart["epochs"], c100.temperature) == (0.1, 1000, 100, 1.1)
    assert (inet.dart["delta"], inet.dart["n_dir"], inet.dart["epochs"], inet.dart["batch_size"]) == (0.001, 2000, 200, 32)
    assert inet.dart["diagonal_only"] and inet.dart["outputs"] == "w" and inet.adaptive_temperature
    assert inet.optimizer == {"optimizer": "sgd", "lr": 5e-4} and inet.int_per_class == 50 and inet.test_batch_size == 64
    assert BENCHMARKS["pacs"].dart["alpha"] == BENCHMARKS["officehome"].dart["alpha"] == 10.0
    assert BENCHMARKS["officehome"].temperature == 2.0 and BENCHMARKS["domainnet126"].test_batch_size == 32
    for name in ("pacs", "officehome", "domainnet126"):
        assert len(scenarios(name)) == 12 and len(set(scenarios(name))) == 12
    assert "art->cartoon" in scenarios("pacs") and "real->product" in scenarios("officehome")
    with pytest.raises(UnknownNameError, match="valid names: cifar100c-imb"):
        BENCHMARKS["cifar100-imb"]


def test_cells_match_the_papers_tables():
    cells = benchmark_cells("cifar100c-imb")
    # 15 corruptions x 4 IR x (NoAdapt + 4 methods x 3 refiner settings)
    assert len(cells) == 15 * 4 * (1 + 4 * 3)
    pacs = benchmark_cells("pacs")
    assert len(pacs) == 12 * (1 + 8 * 2) and {c.shift for c in pacs} == {"natural"}
    assert {c.method for c in benchmark_cells("domainnet126")} == {"bnadapt"}
    assert benchmark_cells("pacs", image_size=32)[0].params == "size=32"
    assert benchmark_cells("imagenet-c-imb", image_size=224)[0].params == ""


def test_missing_data_names_what_to_get_and_where(root):
    lines = "\n".join(missing_data("cifar100c-imb"))
    assert str(root / "CIFAR-100-C" / "labels.npy") in lines and "3555552" in lines and "cifar100:" in lines
    lines = "\n".join(missing_data("imagenet-c-imb"))
    assert "2235448" in lines and str(root / "ImageNet" / "train") in lines
    (root / "PACS" / "photo").mkdir(parents=True)
    lines = missing_data("pacs")
    assert any("art_painting is missing" in line for line in lines)
    assert not any("photo is missing" in line for line in lines)
    assert any("ImageNet weights" in line for line in lines) == (not large_benchmarks._imagenet_weights_file().is_file())
    for folder in DOMAIN_FOLDERS["pacs"].values():  # every source model present: the weights are not needed
        path = checkpoint_path(dataset="pacs", arch="resnet50-imagenet", recipe="domain", seed=0, split=folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    assert not any("ImageNet weights" in line for line in missing_data("pacs"))


def test_cifar100c_imb_runs_from_the_release_layout(root):
    """CIFAR-100 image folders train the source model and g_phi; the CIFAR-100-C npy files (5
    severities stacked, labels.npy) feed the online-imbalance streams; resumable."""
    rng = np.random.default_rng(0)
    k = 10
    for split, n in (("train", 12), ("test", 4)):
        for c in range(k):
            _write_images(root / "cifar100" / split / f"class{c:02d}", n, rng, shade=c)
    folder = root / "CIFAR-100-C"
    folder.mkdir()
    labels = np.repeat(np.arange(k), 10)
    np.save(folder / "gaussian_noise.npy", rng.integers(0, 256, (5 * len(labels), 32, 32, 3), dtype=np.uint8))
    np.save(folder / "labels.npy", np.tile(labels, 5))
    assert missing_data("cifar100c-imb") == []

    cells = benchmark_cells("cifar100c-imb", corruptions=["gaussian_noise"], shift_params=[1, 200],
                            methods=["noadapt", "bnadapt", "tent"])
    path = root / "results" / "table2.csv"
    tiny = Overrides(arch="small-cnn", recipe="smoke", dart=TINY_DART)
    results = run_benchmark("cifar100c-imb", path=path, cells=cells, device="cpu", overrides=tiny, progress=False)
    assert len(results) == len(cells) == 2 * (1 + 2 * 3)
    assert set(results.refiner) == {"none", "dart", "dart-split"} and (results.n == 100).all()
    assert results.accuracy.between(0, 100).all()
    assert checkpoint_path(dataset="cifar100", arch="small-cnn", recipe="smoke", seed=0).is_file()
    stored = read_results(path)
    again = run_benchmark("cifar100c-imb", path=path, cells=cells, overrides=tiny, progress=False)
    assert len(read_results(path)) == len(stored)  # nothing re-run
    assert again.accuracy.tolist() == results.accuracy.tolist()

    context = prepare("cifar100c-imb", overrides=Overrides(arch="small-cnn", recipe="smoke", dart=TINY_DART),
                      progress=False)
    assert context.refiner.temperature == context.refiners["dart-split"].temperature == 1.1
    assert context.batch_size == 200


def test_imagenet_c_imb_runs_from_class_folders(root):
    """ImageNet train/<wnid>/ gives D_int (50 per class); ImageNet-C <corruption>/5/<wnid>/ the
    streams. W diagonal with b = 0, the adaptive temperature and SGD 5e-4 are in force."""
    rng = np.random.default_rng(1)
    wnids = ["n01440764", "n01443537", "n01484850"]
    for c, wnid in enumerate(wnids):
        _write_images(root / "ImageNet" / "train" / wnid, 52, rng, size=(40, 36), suffix=".JPEG", shade=c)
        _write_images(root / "ImageNet-C" / "gaussian_noise" / "5" / wnid, 8, rng, size=(32, 32), suffix=".JPEG",
                      shade=c)
    torch.manual_seed(0)
    source = save_source(small_cnn(3).eval(), {"arch": "small-cnn", "num_classes": 3},
                         root / "checkpoints" / "tiny-imagenet-source.pt")

    context = prepare("imagenet-c-imb", overrides=Overrides(checkpoint=source, dart=TINY_DART, image_size=32),
                      progress=False)
    split, dart = context.refiners["dart-split"], context.refiner
    for refiner in (split, dart):
        assert refiner.config.diagonal_only and refiner.config.outputs == "w" and refiner.adaptive_temperature
        assert np.isfinite([refiner.train_logit_stats["max"], refiner.train_logit_stats["sum"]]).all()
    assert context.options["tent"] == {"optimizer": "sgd", "lr": 5e-4}
    cell = benchmark_cells("imagenet-c-imb", corruptions=["gaussian_noise"], shift_params=[1000], methods=["tent"],
                           refiners=["dart-split"], image_size=32)[0]
    adapter = context.adapter(cell)
    assert isinstance(adapter.optimizer, torch.optim.SGD) and adapter.optimizer.param_groups[0]["lr"] == 5e-4

    cells = benchmark_cells("imagenet-c-imb", corruptions=["gaussian_noise"], shift_params=[1, 1000],
                            methods=["noadapt", "bnadapt", "tent"], image_size=32)
    results = run_benchmark("imagenet-c-imb", path=root / "online.csv", cells=cells, device="cpu",
                            overrides=Overrides(checkpoint=source, dart=TINY_DART, image_size=32), progress=False)
    assert len(results) == 2 * (1 + 2 * 3) and (results.n == 24).all()
    assert dart.module.net[2].out_features == 3 and dart.module.n_b == 0  # diagonal W: K outputs, b = 0


@pytest.mark.parametrize("name", ["pacs", "officehome", "domainnet126"])
def test_domain_benchmarks_run_from_domain_folders(root, name):
    """<domain>/<class>/<image> folders with uneven class counts; one source model and one g_phi
    per source domain; each scenario's stream is the target domain in random order."""
    rng = np.random.default_rng(2)
    base = {"pacs": "PACS", "officehome": "OfficeHome", "domainnet126": "DomainNet126"}[name]
    for d, folder in enumerate(DOMAIN_FOLDERS[name].values()):
        for c, count in enumerate((30, 20, 14)):
            _write_images(root / base / folder / f"class_{c}", count + d, rng, size=(40, 40), shade=c)
    assert missing_data(name) == [] or all("weights" in line for line in missing_data(name))
    first, second = list(DOMAIN_FOLDERS[name])[:2]
    methods = ["noadapt", "bnadapt", "tent", "note"] if name == "pacs" else ["bnadapt"]
    tiny = {**TINY_DART, "n_dir": 2}  # D_int: 3 classes x 14 images (the smallest class)
    cells = benchmark_cells(name, scenario_list=[f"{first}->{second}", f"{second}->{first}"], methods=methods,
                            image_size=32)
    results = run_benchmark(name, path=root / f"{name}.csv", cells=cells, device="cpu", progress=False,
                            overrides=Overrides(arch="small-cnn", recipe="smoke", dart=tiny, image_size=32, note_epochs=1))
    assert len(results) == len(cells)
    sizes = dict(zip(results.corruption, results.n))
    assert sizes[f"{first}->{second}"] == 64 + 3 and sizes[f"{second}->{first}"] == 64
    for domain in (first, second):
        assert checkpoint_path(dataset=name, arch="small-cnn", recipe="smoke", seed=0,
                               split=DOMAIN_FOLDERS[name][domain]).is_file()
    context = prepare(name, domain=first, overrides=Overrides(arch="small-cnn", recipe="smoke", dart=tiny, image_size=32),
                      progress=False)
    assert context.refiner.temperature == BENCHMARKS[name].temperature
    assert context.refiner.config.alpha == BENCHMARKS[name].dart["alpha"]
    assert context.batch_size == BENCHMARKS[name].test_batch_size


def test_imagenet_c_keeps_released_224_crops_and_resizes_others(root):
    from dartlib.data.image_folders import _resize_centre_crop

    same = Image.new("RGB", (224, 224), (10, 20, 30))
    assert _resize_centre_crop(same, 224) is same
    assert _resize_centre_crop(Image.new("RGB", (500, 375)), 224).size == (224, 224)



def test_paper_results_hold_each_benchmarks_tables():
    from dartlib.studies.large_benchmarks import paper_results

    c100 = paper_results("cifar100c-imb")
    mean = c100[c100.corruption == "mean"].set_index(["method", "refiner", "shift_param"]).accuracy
    assert mean[("bnadapt", "none", 200.0)] == 29.1 and mean[("bnadapt", "dart-split", 200.0)] == 45.8
    assert not mean.index.duplicated().any()
    assert len(c100[c100.corruption != "mean"]) == 4 * 135  # four IR tables, 15 corruptions x 9 rows
    pacs = paper_results("pacs")
    assert set(pacs[pacs.corruption != "mean"].corruption) == set(scenarios("pacs"))
    assert (pacs[pacs.corruption == "mean"].method.nunique()) == 9
    dn = paper_results("domainnet126")
    assert set(dn.corruption) == {"mean"} and set(dn.refiner) == {"none", "dart"}


def test_report_puts_our_benchmark_tables_beside_the_papers(root, monkeypatch):
    import pandas as pd

    from dartlib import paths
    from dartlib.studies.large_benchmarks import benchmark_report

    monkeypatch.setattr(paths, "REPO_ROOT", root)  # tables go to <root>/results/fixture/tables
    monkeypatch.setattr(paths, "from_checkout", lambda: True)
    cells = benchmark_cells("cifar100c-imb", corruptions=["gaussian_noise", "fog"], shift_params=[200],
                            methods=["bnadapt"], refiners=["none", "dart-split"])
    results = pd.DataFrame([{**c.__dict__, "accuracy": acc} for c, acc in zip(cells, [30.0, 40.0, 50.0, 60.0])])
    tables = benchmark_report("cifar100c-imb", results, profile="fixture", describe="fixture")
    summary = tables["cifar100c-imb"]
    assert summary.loc[("BNAdapt", "200"), "ours"] == pytest.approx((30.0 + 40.0) / 2)
    assert summary.loc[("BNAdapt", "200"), "paper"] == 29.1
    full = tables["cifar100c-imb_ir200"]
    assert full.loc[("BNAdapt+DART-split", "fog"), "ours"] == 60.0
    assert (root / "results" / "fixture" / "tables" / "cifar100c-imb_ir200.md").is_file()
