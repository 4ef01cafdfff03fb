"""The Ray backend against the local one on the smoke Table 1 grid: wall time, one run each.

Two cases, each from the same starting results file for both backends (written in a temporary
folder; results/ is left alone):

- ``full``: the whole grid from an empty file;
- ``stale``: a retrained refiner, i.e. only the DART cells to compute (the stored rows of
  ``results/smoke/table1.csv`` less its DART rows), the case that a hand split of the cells
  between processes balances badly.

The local backend is one process with torch's default threads, as ``python -m dartlib grid``
runs; the Ray backend starts a local Ray instance with ``--workers`` single-thread workers.
Each time includes building the shared context (once per process or worker) and, for Ray, starting
Ray. The rows of both backends are compared (all columns but ``seconds``).

Usage: ``python benchmarks/ray_grid.py [--workers 2] [--cases stale,full]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cases", default="full,stale")
    args = parser.parse_args()
    os.environ.setdefault("TQDM_DISABLE", "1")

    from dartlib.experiments.distributed import ContextFactory, run_grid_ray
    from dartlib.experiments.engine import evaluate_cell, prepare_context
    from dartlib.experiments.grid import read_results, run_grid
    from dartlib.experiments.settings import Settings
    from dartlib.studies.table1 import profile_cells
    from dartlib.paths import NOTEBOOKS_DIR, results_dir
    from dartlib.profiles import load_profile
    from dartlib.runner import notebook_parameters

    params = {**notebook_parameters(NOTEBOOKS_DIR / "06_table1_main.ipynb"), **load_profile("smoke")}
    settings = Settings.from_params(params)
    cells = profile_cells(settings)
    factory = ContextFactory(prepare_context, {"settings": settings})
    stored = read_results(results_dir("smoke") / "table1.csv")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            start = {"full": stored.iloc[:0], "stale": stored[stored["refiner"] != "dart"]}[case]
            paths = {b: Path(tmp) / f"{case}-{b}.csv" for b in ("local", "ray")}
            for path in paths.values():
                start.to_csv(path, index=False, float_format="%.6g")
            todo = len(cells) - len(start[start["key"].isin({c.key for c in cells})])

            began = time.perf_counter()
            context = factory()
            run_grid(cells, lambda c: evaluate_cell(c, context), path=paths["local"], experiment="table1",
                     progress=False, inputs=context.inputs)
            local = time.perf_counter() - began

            began = time.perf_counter()
            run_grid_ray(cells, factory, path=paths["ray"], experiment="table1", progress=False,
                         workers=args.workers, cpus_per_cell=1)
            remote = time.perf_counter() - began

            a, b = (read_results(p).drop(columns="seconds").sort_values("key").reset_index(drop=True)
                    for p in paths.values())
            rows.append((case, todo, local, remote, a.equals(b)))
    print(f"smoke Table 1 grid ({len(cells)} cells), local: 1 process, {torch.get_num_threads()} torch threads; "
          f"ray: {args.workers} workers x 1 thread; {os.cpu_count()} CPUs; one run each")
    print("| case | cells computed | local s | ray s | local / ray | rows equal |")
    print("|---|---|---|---|---|---|")
    for case, todo, local, remote, same in rows:
        print(f"| {case} | {todo} | {local:.1f} | {remote:.1f} | {local / remote:.2f} | {same} |")


if __name__ == "__main__":
    main()
