"""The large benchmarks of notebooks 11 (Table 2's CIFAR-100C-imb and ImageNet-C-imb) and 12 (PACS,
OfficeHome, DomainNet-126): run where their data are present, reported beside the paper's, or
listed as NOT RUN with what to download."""

from __future__ import annotations

from collections.abc import Sequence

from dartlib.experiments.benchmarks import BENCHMARKS, missing_data, run_benchmark
from dartlib.experiments.settings import Settings
from dartlib.paths import results_dir
from dartlib.reporting.benchmark_tables import report
from dartlib.reporting.tables import render


def print_benchmarks(*, names: Sequence[str], settings: Settings, per_source_domain: bool = False) -> None:
    """For each benchmark: what is missing, or its cells run (``results/<profile>/<name>.csv``,
    resumable) and every table of :func:`dartlib.reporting.benchmark_tables.report` printed.
    ``per_source_domain``: the titles say the source model is one per domain (the domain benchmarks)."""
    for name in names:
        missing = missing_data(name)
        if missing:
            print(f"{name}: NOT RUN, missing:\n" + "\n".join(f"    {line}" for line in missing))
            continue
        bench = BENCHMARKS[name]
        results = run_benchmark(name, path=results_dir(settings.profile) / f"{name}.csv", seed=settings["seed"])
        model = f"{bench.arch} per source domain ({bench.recipe} recipe)" if per_source_domain else bench.arch
        describe = f"{settings.profile} profile: {model}, seed {settings['seed']}; paper: 4 seeds"
        for key, table in report(name, results, profile=settings.profile, describe=describe).items():
            print(render(table, title=key))
