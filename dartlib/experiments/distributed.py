"""Grids on Ray: the cells of a grid fanned out over every core and GPU of one machine or a cluster.

The local backend (:func:`dartlib.experiments.grid.run_grid`) stays the reference; this one gives
the same rows (all but ``seconds``). Each worker is a Ray actor that builds the grid's shared
inputs once (source model, g_phi, NOTE's IABN copy, corrupted sets: a :class:`ContextFactory`
calls the same ``prepare_*`` function as the local path) and then evaluates the cells it is handed
with :func:`dartlib.experiments.engine.evaluate_cell`. Idle workers pull the next cell, so a slow
method or a block of stale cells never leaves a worker waiting on a fixed share.

Only the driver writes the results file, row by row as cells finish, so an interrupted run keeps
every finished row and resumes where it stopped (cells already current, by the same input
digests, are skipped). Ray is imported only here, when this backend is used.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from dartlib.experiments.grid import Cell, pending_cells, store_row, stored_rows

def import_ray():
    """The ``ray`` module, or an ImportError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError("the ray backend needs Ray: pip install ray (or run the grid with --backend local)") from None
    return ray


@dataclass(frozen=True)
class ContextFactory:
    """How a worker builds the context every cell of a grid shares: ``prepare(**kwargs)``, a
    ``prepare_*`` function (e.g. :func:`dartlib.experiments.engine.prepare_context`) whose first
    return value is the context. Picklable (the function is sent by reference), so each worker
    calls it once. ``threads``: torch CPU threads of the worker (None: left as Ray sets them)."""

    prepare: Callable
    kwargs: dict = field(default_factory=dict)
    threads: int | None = None

    def __call__(self):
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        built = self.prepare(**self.kwargs)
        return built[0] if isinstance(built, tuple) else built


class GridWorker:
    """A Ray actor's state: one context, built on the first call, and the cells it evaluates."""

    def __init__(self, factory: Callable[[], object]) -> None:
        self.factory = factory
        self.context = None

    def prepare(self, cells: list[Cell]) -> dict[str, str]:
        """Build the context (loading what the driver's training stage made) and return the input digest
        of each cell."""
        if self.context is None:
            self.context = self.factory()
        return {c.key: self.context.inputs(c) for c in cells}

    def evaluate(self, cell: Cell) -> tuple[dict, float]:
        """One cell's result and the seconds it took (the context is built already)."""
        from dartlib.experiments.engine import evaluate_cell

        start = time.perf_counter()
        result = evaluate_cell(cell, self.context)
        return result, time.perf_counter() - start


class CellsFailed(RuntimeError):
    """Cells of a grid that raised; every other cell was computed and stored."""

    def __init__(self, failures: list[tuple[Cell, str]]) -> None:
        self.failures = failures
        super().__init__(f"{len(failures)} cell(s) failed: " + "; ".join(c.label() for c, _ in failures))


def run_grid_ray(
    cells: Iterable[Cell],
    factory: Callable[[], object],
    *,
    path: Path,
    experiment: str,
    progress: bool = True,
    reuse: Sequence[Path] = (),
    address: str | None = None,
    workers: int | None = None,
    cpus_per_cell: float = 1.0,
    gpus_per_cell: float = 0.0,
) -> pd.DataFrame:
    """:func:`dartlib.experiments.grid.run_grid` on Ray: the same rows in ``path``, the same return value.

    ``factory()`` builds the shared context (with ``inputs(cell)`` and what
    :func:`dartlib.experiments.engine.evaluate_cell` needs) in each worker; the first worker builds
    it alone (it trains whatever is absent, so the others only load it) and gives the cells' input
    digests. ``address``: a running Ray cluster (``"auto"``, ``"ray://host:10001"``...); None
    joins the Ray instance already started in this process, else starts a local one on this
    machine (shut down afterwards). Each worker holds ``cpus_per_cell`` CPUs (its torch threads)
    and ``gpus_per_cell`` GPUs: 0.25 runs four cells on each GPU. ``workers``: how many (default:
    as many as the cluster's CPUs and GPUs hold, at most one per cell to compute).

    A cell that raises is reported with its traceback and the others go on; :class:`CellsFailed`
    names the failed ones at the end. Ctrl-C stops the workers; every finished row is stored."""
    ray = import_ray()
    cells = list(cells)
    started = not ray.is_initialized()
    if started:
        # the workers are the job here: Ray's default niceness (15) would starve them on a busy machine
        os.environ.setdefault("RAY_worker_niceness", "0")
        ray.init(address=address, include_dashboard=False)
    pool = []
    try:
        actor = ray.remote(GridWorker).options(num_cpus=cpus_per_cell, num_gpus=gpus_per_cell)
        wrapped = ContextFactory(factory.prepare, factory.kwargs, factory.threads or max(1, round(cpus_per_cell))) \
            if isinstance(factory, ContextFactory) else factory
        pool.append(actor.remote(wrapped))
        digests = ray.get(pool[0].prepare.remote(cells))
        todo = pending_cells(cells, path=path, experiment=experiment, digests=digests, reuse=reuse)
        if todo:
            size = min(len(todo), workers or _capacity(ray.cluster_resources(), cpus_per_cell, gpus_per_cell))
            pool += [actor.remote(wrapped) for _ in range(size - 1)]
            ray.get([w.prepare.remote([]) for w in pool[1:]])
            failures = _pull(ray, pool, todo, digests, path=path, experiment=experiment, progress=progress)
            if failures:
                raise CellsFailed(failures)
    finally:
        for worker in pool:  # finished, failed or interrupted: free their CPUs and GPUs for what comes next
            ray.kill(worker)
        if started:
            ray.shutdown()
    return stored_rows(cells, path=path)


def _capacity(resources: dict, cpus_per_cell: float, gpus_per_cell: float) -> int:
    """How many workers of the given size the cluster holds at once (at least one)."""
    counts = []
    if cpus_per_cell > 0:
        counts.append(int(resources.get("CPU", 0) // cpus_per_cell))
    if gpus_per_cell > 0:
        counts.append(int(resources.get("GPU", 0) // gpus_per_cell))
    return max(1, min(counts) if counts else 1)


def _pull(ray, pool: list, todo: list[Cell], digests: dict[str, str], *, path: Path, experiment: str,
          progress: bool) -> list[tuple[Cell, str]]:
    """Hand the cells out, one at a time, to whichever worker is free; store each result as it comes."""
    queue, idle, running, failures = list(reversed(todo)), list(pool), {}, []
    bar = tqdm(total=len(todo), desc=experiment, unit="cell", **({} if progress else {"disable": True}))  # TQDM_DISABLE=1 silences it
    try:
        while queue or running:
            while queue and idle:
                worker, cell = idle.pop(), queue.pop()
                running[worker.evaluate.remote(cell)] = (worker, cell)
            if not running:
                raise RuntimeError(f"every Ray worker died; {len(queue)} cell(s) left (the finished ones are stored)")
            [ref], _ = ray.wait(list(running), num_returns=1)
            worker, cell = running.pop(ref)
            try:
                result, seconds = ray.get(ref)
            except ray.exceptions.RayActorError:
                # the worker is gone (killed, out of memory): its cell goes back to the others
                pool.remove(worker)
                queue.append(cell)
                continue
            except ray.exceptions.RayTaskError as err:
                failures.append((cell, str(err)))
                tqdm.write(f"cell failed: {cell.label()}\n{err}")
            else:
                store_row(cell, result, path=path, experiment=experiment, seconds=seconds, digest=digests[cell.key])
                bar.set_postfix_str(cell.label())
            bar.update()
            idle.append(worker)
    finally:
        bar.close()
    return failures

