"""The large-scale and natural-shift benchmarks, with the paper's settings for each (Section 4,
Appendices A-B): CIFAR-100C-imb and ImageNet-C-imb (Table 2 and the DART-split table), PACS and
OfficeHome (Table 1's last columns and their per-scenario tables) and DomainNet-126.

Each benchmark is one :class:`Benchmark` entry; :func:`run_benchmark` trains or loads what it
needs (the source model, g_phi, NOTE's IABN copy), runs every cell through the resumable grid
runner and returns the results in the results schema. :func:`missing_data` says what is absent
and how to get it, so a notebook can report NOT RUN instead of failing. The keyword overrides of
:func:`run_benchmark` (architecture, recipe, intermediate settings, image size) exist so that the
same code path runs on tiny fixtures in the tests; the defaults are the paper's.

Every benchmark's tables beside the paper's (:func:`benchmark_report`, :func:`print_benchmarks`:
run where its data are present, else NOT RUN with what to download)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import permutations
from pathlib import Path

import pandas as pd
import torch

from dartlib import tta
from dartlib.dart.refiner import DartConfig
from dartlib.data.corruptions import CORRUPTIONS
from dartlib.data.sources import DOMAIN_FOLDERS, HOW_TO_GET, expected_path, load
from dartlib.data.dataset import Dataset
from dartlib.devices import default_device
from dartlib.experiments.cell_options import options_text
from dartlib.experiments.engine import TestTimeContext, paired, run_cells
from dartlib.experiments.grid import Cell, grid
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir
from dartlib.registry import Registry
from dartlib.reporting.paper import load_table
from dartlib.reporting.tables import beside_paper, render, row_label
from dartlib.studies.online_imbalance import METHOD_OPTIONS as ONLINE_METHOD_OPTIONS
from dartlib.studies.table1 import TABLE1_METHODS
from dartlib.tta.note import PAPER_IABN_EPOCHS


@dataclass(frozen=True)
class Benchmark:
    """One benchmark and the paper's settings for it (Appendix A unless noted)."""

    name: str
    test_dataset: str  # a dartlib.data name
    kind: str  # "online" (online-imbalance streams of a corrupted set) or "domain" (source -> target)
    source: str  # "train" (train_source), "torchvision" (the released ImageNet model) or "domain"
    source_dataset: str  # training data of the source model and of g_phi
    arch: str
    recipe: str
    methods: tuple[str, ...]
    refiners: tuple[str, ...]
    dart: dict  # DartConfig values (delta, N_dir, epochs, batch, alpha, ...)
    test_batch_size: int
    shift_params: tuple[float, ...] = ()  # imbalance ratios (online)
    temperature: float = 1.0  # fixed logit multiplier at test time (2 on OfficeHome, 1.1 on CIFAR-100)
    adaptive_temperature: bool = False  # Appendix B's running T (ImageNet-C)
    optimizer: dict = field(default_factory=dict)  # test-time optimiser of the gradient methods
    image_size: int | None = None  # resize + centre crop on loading (None: as stored)
    int_per_class: int | None = None  # D_int images per class read from the training data (None: all)
    note_epochs: int = PAPER_IABN_EPOCHS  # NOTE's IABN fine-tuning epochs
    split: dict = field(default_factory=dict)  # DART-split's own DartConfig values over ``dart`` (Appendix B)

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(DOMAIN_FOLDERS[self.test_dataset]) if self.kind == "domain" else ()


_ONLINE = ("noadapt", "bnadapt", "tent", "sar", "ods")

BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark",
    {
        # ResNet-26 trained on CIFAR-100 with the Conjugate-PL recipe; delta 0.1 (DART-split: 0.01, Appendix B),
        # N_dir 1000, 100 epochs; logits x 1.1.
        "cifar100c-imb": Benchmark(
            name="cifar100c-imb", test_dataset="cifar100c", kind="online", source="train", source_dataset="cifar100",
            arch="resnet26", recipe="paper", methods=_ONLINE, refiners=("none", "dart", "dart-split"),
            dart={"delta": 0.1, "n_dir": 1000, "epochs": 100, "batch_size": 64, "alpha": 0.1, "hidden": 1000},
            split={"delta": 0.01}, test_batch_size=200, shift_params=(1.0, 200.0, 500.0, 50000.0), temperature=1.1),
        # torchvision's ResNet-50; D_int = 50 ImageNet training images per class; delta 0.001, N_dir 2000,
        # 200 epochs, batch 32; W diagonal and b = 0 (Appendix B); adaptive temperature; SGD 5e-4 at test time.
        "imagenet-c-imb": Benchmark(
            name="imagenet-c-imb", test_dataset="imagenet-c", kind="online", source="torchvision",
            source_dataset="imagenet", arch="resnet50", recipe="torchvision", methods=_ONLINE,
            refiners=("none", "dart", "dart-split"),
            dart={"delta": 0.001, "n_dir": 2000, "epochs": 200, "batch_size": 32, "alpha": 0.1, "hidden": 1000,
                  "diagonal_only": True, "outputs": "w"},
            test_batch_size=64, shift_params=(1.0, 1000.0, 5000.0, 500000.0), adaptive_temperature=True,
            optimizer={"optimizer": "sgd", "lr": 5e-4}, image_size=224, int_per_class=50),
        # ResNet-50 per source domain; alpha 10; batch 64 at test time.
        "pacs": Benchmark(
            name="pacs", test_dataset="pacs", kind="domain", source="domain", source_dataset="pacs",
            arch="resnet50-imagenet", recipe="domain", methods=TABLE1_METHODS, refiners=("none", "dart"),
            dart={"delta": 10.0, "n_dir": 250, "epochs": 50, "batch_size": 64, "alpha": 10.0, "hidden": 1000},
            test_batch_size=64, image_size=224),
        "officehome": Benchmark(
            name="officehome", test_dataset="officehome", kind="domain", source="domain", source_dataset="officehome",
            arch="resnet50-imagenet", recipe="domain", methods=TABLE1_METHODS, refiners=("none", "dart"),
            dart={"delta": 10.0, "n_dir": 250, "epochs": 50, "batch_size": 64, "alpha": 10.0, "hidden": 1000},
            test_batch_size=64, temperature=2.0, image_size=224),
        # The appendix's DomainNet-126 table: BNAdapt with and without DART, test batch 32 (alpha: the general 0.1).
        "domainnet126": Benchmark(
            name="domainnet126", test_dataset="domainnet126", kind="domain", source="domain",
            source_dataset="domainnet126", arch="resnet50-imagenet", recipe="domain", methods=("bnadapt",),
            refiners=("none", "dart"),
            dart={"delta": 10.0, "n_dir": 250, "epochs": 50, "batch_size": 64, "alpha": 0.1, "hidden": 1000},
            test_batch_size=32, image_size=224),
    },
)


def scenarios(name: str) -> list[str]:
    """The 12 ``source->target`` scenarios of a domain benchmark, in the paper's short names."""
    return [f"{s}->{t}" for s, t in permutations(BENCHMARKS[name].domains, 2)]


def _imagenet_weights_file() -> Path:
    import torchvision

    url = torchvision.models.ResNet50_Weights.IMAGENET1K_V1.url
    return Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[-1]


def missing_data(name: str, *, seed: int = 0) -> list[str]:
    """What benchmark ``name`` needs and this machine lacks: one line per item, with where the
    suite looks and how to obtain it (empty when everything is present). The ImageNet weights
    count only while a source checkpoint (of seed ``seed``) that would be built from them is absent."""
    from dartlib.models.checkpoints import checkpoint_path

    bench = BENCHMARKS[name]
    needed = [bench.test_dataset] + ([bench.source_dataset] if bench.source_dataset != bench.test_dataset else [])
    lines = [f"{d}: expected at {expected_path(d)}; {HOW_TO_GET[d]}" for d in needed if not expected_path(d).exists()]
    if bench.kind == "domain":
        root = expected_path(bench.test_dataset)
        if root.exists():
            lines += [f"{bench.test_dataset}: domain folder {root / folder} is missing"
                      for folder in DOMAIN_FOLDERS[bench.test_dataset].values() if not (root / folder).is_dir()]
    if bench.source == "torchvision":
        sources = [checkpoint_path(dataset="imagenet", arch=bench.arch, recipe="torchvision", seed=0)]
    elif bench.arch.endswith("-imagenet"):
        sources = [checkpoint_path(dataset=bench.test_dataset, arch=bench.arch, recipe=bench.recipe, seed=seed, split=f)
                   for f in DOMAIN_FOLDERS[bench.test_dataset].values()]
    else:
        sources = []
    if any(not path.is_file() for path in sources):
        weights = _imagenet_weights_file()
        if not weights.is_file():
            lines.append(f"torchvision ResNet-50 ImageNet weights: expected at {weights}; torch.hub downloads them "
                         "once with internet (torchvision.models.resnet50(weights='IMAGENET1K_V1'))")
    return lines


def benchmark_cells(name: str, *, seed: int = 0, corruptions=None, shift_params=None, methods=None, refiners=None,
                    scenario_list=None, limit: int = 0, image_size: int | None = None) -> list[Cell]:
    """The cells of a benchmark (every method with and without each refiner; NoAdapt without),
    optionally restricted. ``limit`` keeps the first images of each stream; ``image_size`` other
    than the benchmark's is recorded in the params (reduced runs, fixtures)."""
    bench = BENCHMARKS[name]
    size = image_size if image_size is not None and image_size != bench.image_size else None
    axes = dict(dataset=[bench.test_dataset], method=list(methods or bench.methods),
                refiner=list(refiners or bench.refiners), params=[options_text(limit=limit or None, size=size)], seed=[seed])
    if bench.kind == "online":
        cells = grid(**axes, shift=["online-imb"], shift_param=[float(r) for r in (shift_params or bench.shift_params)],
                     corruption=list(corruptions or CORRUPTIONS), severity=[5])
    else:
        cells = grid(**axes, shift=["natural"], shift_param=[None], corruption=list(scenario_list or scenarios(name)),
                     severity=[None])
    return paired(cells)


def source_checkpoint(bench: Benchmark, *, domain: str | None = None, seed: int = 0, arch: str | None = None,
                      recipe: str | None = None, image_size: int | None = None, device: str | None = None,
                      progress: bool = True) -> Path:
    """The source model of a benchmark (of one source ``domain``), trained or imported once."""
    from dartlib.models.checkpoints import checkpoint_path, save_source
    from dartlib.models.training import Splits, train_source

    arch, recipe = arch or bench.arch, recipe or bench.recipe
    if bench.source == "train":
        return train_source(dataset=bench.source_dataset, arch=arch, recipe=recipe, seed=seed, device=device,
                            progress=progress)
    if bench.source == "domain":
        options = (("image_size", image_size),) if image_size else ()
        folder = DOMAIN_FOLDERS[bench.test_dataset][domain]
        return train_source(dataset=bench.test_dataset, arch=arch, recipe=recipe, seed=seed, device=device,
                            progress=progress, splits=Splits(train=folder, test=folder, load_options=options))
    path = checkpoint_path(dataset="imagenet", arch=arch, recipe="torchvision", seed=0)
    if not path.is_file():
        from dartlib.models.backbones import resnet50

        model = resnet50(1000, weights="imagenet")
        save_source(model, {"arch": "resnet50", "num_classes": 1000, "dataset": "imagenet",
                            "recipe": "torchvision ResNet50_Weights.IMAGENET1K_V1",
                            "clean_test_accuracy": 76.13, "clean_test_accuracy_source": "torchvision's documented top-1"},
                    path)
    return path


def intermediate_data(bench: Benchmark, *, domain: str | None = None, seed: int = 0,
                      image_size: int | None = None) -> Dataset:
    """The labelled training data D_int is drawn from (class-balanced by the refiner's trainer)."""
    size = image_size or bench.image_size
    if bench.kind == "domain":
        return load(bench.test_dataset, split=DOMAIN_FOLDERS[bench.test_dataset][domain],
                    **({"image_size": size} if size else {}))
    if bench.source_dataset == "imagenet":
        return load("imagenet", split="train", per_class=bench.int_per_class, seed=seed, image_size=size or 224)
    return load(bench.source_dataset, split="train")


@dataclass(frozen=True)
class Overrides:
    """Changes to a benchmark's paper settings, so that the same code path runs on tiny fixtures (the
    tests): the source model's ``arch`` and ``recipe`` or a ready ``checkpoint``, DartConfig fields
    (``dart``), the ``image_size`` and NOTE's IABN epochs. None and empty: the paper's."""

    arch: str | None = None
    recipe: str | None = None
    checkpoint: Path | None = None
    dart: dict = field(default_factory=dict)
    image_size: int | None = None
    note_epochs: int | None = None


PAPER_SETTINGS = Overrides()


def prepare(name: str, *, domain: str | None = None, seed: int = 0, device: str | None = None,
            overrides: Overrides = PAPER_SETTINGS, with_note: bool = False, progress: bool = True) -> TestTimeContext:
    """What every cell of a benchmark (of one source domain) shares: the source model, DART's
    g_phi and/or DART-split's pair (temperature set as the paper does), NOTE's IABN copy, all on
    ``device`` (None: the machine's, :func:`dartlib.devices.default_device`)."""
    from dartlib.dart.intermediate import load_or_train_refiner, logit_statistics
    from dartlib.models.checkpoints import load_checkpoint
    from dartlib.tta.note import load_or_finetune_iabn

    bench, o = BENCHMARKS[name], overrides
    device = device or default_device()
    checkpoint = o.checkpoint or source_checkpoint(bench, domain=domain, seed=seed, arch=o.arch, recipe=o.recipe,
                                                   image_size=o.image_size, device=device, progress=progress)
    model, _ = load_checkpoint(checkpoint)
    train = intermediate_data(bench, domain=domain, seed=seed, image_size=o.image_size)
    refiners = {}
    for variant in [r for r in bench.refiners if r != "none"]:
        settings = {**bench.dart, **(bench.split if variant == "dart-split" else {}), **o.dart}
        config = DartConfig(variant=variant, seed=seed, **settings)
        refiner, _ = load_or_train_refiner(checkpoint, model, train, config, device=device, progress=progress)
        refiner.temperature = bench.temperature
        if bench.adaptive_temperature:
            refiner.adaptive_temperature = True
            refiner.train_logit_stats = logit_statistics(model, train.images, device=device)
        refiners[variant] = refiner
    iabn = None
    if with_note:
        iabn, _ = load_or_finetune_iabn(checkpoint, model, train, epochs=o.note_epochs or bench.note_epochs,
                                        seed=seed, device=device, progress=progress)
    options = {}
    if bench.optimizer:
        options = {m: dict(bench.optimizer) for m in bench.methods
                   if "optimizer" in inspect.signature(tta.METHODS[m].__init__).parameters}
    if bench.kind == "online":
        for method, extra in ONLINE_METHOD_OPTIONS.items():
            options[method] = {**options.get(method, {}), **extra}
    return TestTimeContext(source=model, refiner=refiners.pop("dart", None), refiners=refiners,
                           trained={} if iabn is None else {"iabn": iabn}, batch_size=bench.test_batch_size,
                           device=device, options=options)


def run_benchmark(name: str, *, path: Path, seed: int = 0, device: str | None = None, cells: list[Cell] | None = None,
                  overrides: Overrides = PAPER_SETTINGS, progress: bool = True) -> pd.DataFrame:
    """Run ``cells`` (default: all of :func:`benchmark_cells`) of benchmark ``name`` into the
    results file ``path`` (resumable; a stored cell is recomputed when its source model or g_phi
    changed) and return their results. Domain benchmarks prepare one context per source domain."""
    bench = BENCHMARKS[name]
    device = device or default_device()
    cells = cells if cells is not None else benchmark_cells(name, seed=seed, image_size=overrides.image_size)
    with_note = "note" in {c.method for c in cells}
    contexts: dict[str | None, TestTimeContext] = {}

    def context_of(cell: Cell) -> TestTimeContext:
        domain = cell.corruption.split("->")[0] if bench.kind == "domain" else None
        if domain not in contexts:
            contexts[domain] = prepare(name, domain=domain, seed=seed, device=device, overrides=overrides,
                                       with_note=with_note, progress=progress)
        return contexts[domain]

    # Domain by domain, so that the cells of one source model run together.
    ordered = sorted(cells, key=lambda c: c.corruption.split("->")[0]) if bench.kind == "domain" else cells
    return run_cells(ordered, context_of, path=path, experiment=name, progress=progress)


def paper_results(name: str) -> pd.DataFrame:
    """The paper's numbers for a benchmark in the results schema: the averaged rows
    (``corruption == "mean"``; Table 2 with the DART-split table, or Table 1's column / the
    DomainNet table) and the per-corruption or per-scenario rows of the full tables."""
    bench = BENCHMARKS[name]
    if bench.kind == "online":
        means = pd.concat([load_table("table2_online_imb"), load_table("app_dart_split_large_scale")])
        prefix = "full_cifar100c_imb_ir" if bench.test_dataset == "cifar100c" else "full_imagenet_c_imb_ir"
        full = [load_table(f"{prefix}{r:g}") for r in bench.shift_params]
    elif name == "domainnet126":
        means, full = load_table("app_domainnet"), []
    else:
        means, full = load_table("table1_main"), [load_table(f"full_{name}")]
    means = means[(means.dataset == bench.test_dataset) & (means.corruption == "mean")]
    means = means.drop_duplicates(subset=["method", "refiner", "shift_param"])  # Table 2 rows recur in the appendix
    rows = pd.concat([means, *[f[(f.dataset == bench.test_dataset) & (f.corruption != "mean")] for f in full]])
    return rows.reset_index(drop=True)


def benchmark_report(name: str, results: pd.DataFrame, *, profile: str, describe: str) -> dict[str, pd.DataFrame]:
    """Our tables beside the paper's for a benchmark's results (written under
    ``results/<profile>/tables/``): the averaged table (columns IR, or the benchmark) and the
    full tables (per corruption for each IR, or per scenario). ``describe`` (backbone, seeds,
    data) goes into every title."""
    bench = BENCHMARKS[name]
    paper = paper_results(name)
    order = [row_label(m, r) for m in bench.methods for r in bench.refiners if not (m == "noadapt" and r != "none")]
    means, full = paper[paper.corruption == "mean"], paper[paper.corruption != "mean"]
    tables = {}
    if bench.kind == "online":
        tables[name] = beside_paper(results, means, profile=profile, name=name, row_order=order,
                                    title=f"{name}, mean over corruptions, columns IR ({describe})")
        for ir in sorted(results.shift_param.unique()):
            key = f"{name}_ir{ir:g}"
            tables[key] = beside_paper(results[results.shift_param == ir], full[full.shift_param == ir], profile=profile,
                                       name=key, columns="corruption", row_order=order,
                                       title=f"{name}, IR {ir:g}, per corruption ({describe})")
    else:
        tables[name] = beside_paper(results, means, profile=profile, name=name, columns="dataset", row_order=order,
                                    title=f"{name}, mean over scenarios ({describe})")
        tables[f"{name}_scenarios"] = beside_paper(results, full if len(full) else None, profile=profile,
                                                   name=f"{name}_scenarios", columns="corruption", row_order=order,
                                                   title=f"{name}, per scenario ({describe})")
    return tables


def print_benchmarks(*, names: Sequence[str], settings: Settings, per_source_domain: bool = False) -> None:
    """For each benchmark: what is missing, or its cells run (``results/<profile>/<name>.csv``,
    resumable) and every table of :func:`benchmark_report` printed.
    ``per_source_domain``: the titles say the source model is one per domain (the domain benchmarks)."""
    for name in names:
        missing = missing_data(name)
        if missing:
            print(f"{name}: NOT RUN, missing:\n" + "\n".join(f"    {line}" for line in missing))
            continue
        bench = BENCHMARKS[name]
        results = run_benchmark(name, path=results_dir(settings.profile) / f"{name}.csv", seed=settings.seed)
        model = f"{bench.arch} per source domain ({bench.recipe} recipe)" if per_source_domain else bench.arch
        describe = f"{settings.profile} profile: {model}, seed {settings.seed}; paper: 4 seeds"
        for key, table in benchmark_report(name, results, profile=settings.profile, describe=describe).items():
            print(render(table, title=key))
