"""Processes started on one results file share the work (dartlib.experiments.cell_claims.CellClaims):
each cell is computed once, and the file ends as one process alone would have written it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd

from dartlib.experiments.grid import grid, read_results, run_grid
from dartlib.experiments.cell_claims import CellClaims

CELLS = dict(dataset=["fake"], shift=["lt"], shift_param=[1.0, 10.0, 100.0], corruption=["a", "b", "c", "d"],
             severity=[5], method=["bnadapt", "tent"], refiner=["none", "dart"])  # 48 cells

# A cheap deterministic grid: each evaluation is logged (process id, cell key) and takes 50 ms.
WORKER = """
import hashlib, os, sys, time
from pathlib import Path
from dartlib.experiments.grid import grid, run_grid
sys.path.insert(0, {tests!r})
from test_grid_claims import CELLS
log = Path(sys.argv[2])

def evaluate(cell):
    with open(log, "a") as fh:
        fh.write(f"{{os.getpid()}} {{cell.key}}\\n")
    time.sleep(0.05)
    return {{"n": 100, "accuracy": int(hashlib.sha256(cell.key.encode()).hexdigest()[:4], 16) % 10000 / 100}}

Path(sys.argv[3]).touch()  # ready
while not Path(sys.argv[4]).exists():  # start together
    time.sleep(0.01)
run_grid(grid(**CELLS), evaluate, path=Path(sys.argv[1]), experiment="fake", progress=False, inputs=lambda c: "d1")
"""


def _run(tmp_path: Path, results: Path, processes: int, worker: str = WORKER) -> list[str]:
    script = tmp_path / "worker.py"
    script.write_text(worker.format(tests=str(Path(__file__).parent)))
    log, go = tmp_path / f"{results.stem}.log", tmp_path / f"{results.stem}.go"
    log.unlink(missing_ok=True)
    go.unlink(missing_ok=True)
    log.touch()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    children = [subprocess.Popen([sys.executable, str(script), str(results), str(log), str(tmp_path / f"ready{i}"),
                                  str(go)], env=env) for i in range(processes)]
    while not all((tmp_path / f"ready{i}").exists() for i in range(processes)):
        assert all(c.poll() is None for c in children)
    go.touch()
    assert [c.wait(timeout=300) for c in children] == [0] * processes
    for i in range(processes):
        (tmp_path / f"ready{i}").unlink()
    return log.read_text().split("\n")[:-1]


def _rows(path: Path) -> pd.DataFrame:
    frame = read_results(path).drop(columns="seconds")
    return frame.sort_values("key").reset_index(drop=True)


def test_three_processes_compute_each_cell_once_and_end_with_one_process_file(tmp_path):
    cells = grid(**CELLS)
    single = _run(tmp_path, tmp_path / "single.csv", 1)
    assert sorted(line.split()[1] for line in single) == sorted(c.key for c in cells)
    shared = _run(tmp_path, tmp_path / "shared.csv", 3)
    keys = [line.split()[1] for line in shared]
    assert sorted(keys) == sorted(c.key for c in cells)  # every cell once, none twice
    per_process = pd.Series([line.split()[0] for line in shared]).value_counts()
    print(f"cells computed per process: {sorted(per_process.tolist(), reverse=True)} of {len(cells)}")
    assert len(per_process) == 3  # all three took part
    pd.testing.assert_frame_equal(_rows(tmp_path / "shared.csv"), _rows(tmp_path / "single.csv"))
    # a rerun computes nothing
    assert _run(tmp_path, tmp_path / "shared.csv", 3) == []


def test_a_claim_ends_with_its_process(tmp_path):
    results = tmp_path / "r.csv"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from dartlib.experiments.cell_claims import CellClaims\n"
        f"c = CellClaims(Path({str(results)!r})).__enter__(); assert c.claim('k1'); print('held', flush=True); "
        "time.sleep(600)")], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert holder.stdout.readline().strip() == "held"
    with CellClaims(results) as claims:
        assert not claims.claim("k1")  # held by a live process
        assert claims.claim("k2")
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert claims.claim("k1")  # its process is gone: so is its claim


def test_a_cell_stored_meanwhile_is_not_computed_again(tmp_path):
    """A cell another process finished after this one listed it as pending is read, not recomputed."""
    cells = grid(dataset=["fake"], shift=["lt"], shift_param=[1.0], corruption=["a", "b"], severity=[5],
                 method=["bnadapt"])
    path = tmp_path / "r.csv"
    computed = []

    def evaluate(cell):
        if not computed:  # meanwhile, "another process" stores the second cell
            run_grid(cells[1:], lambda c: {"n": 1, "accuracy": 50.0}, path=path, experiment="x", progress=False,
                     inputs=lambda c: "d")
        computed.append(cell.key)
        return {"n": 1, "accuracy": 10.0}

    rows = run_grid(cells, evaluate, path=path, experiment="x", progress=False, inputs=lambda c: "d")
    assert computed == [cells[0].key]
    assert rows.accuracy.tolist() == [10.0, 50.0]


# ``grid --outcomes`` (fill_outcomes) on a grid whose rows were stored without per-image outcomes:
# each evaluation is logged and takes 50 ms, and gives the outcomes that reproduce its stored row.
OUTCOMES_WORKER = """
import os, sys, time
from pathlib import Path
from dartlib.experiments.grid import grid
from dartlib.experiments.outcome_backfill import fill_outcomes
sys.path.insert(0, {tests!r})
from test_grid_claims import CELLS, _with_outcomes
log = Path(sys.argv[2])

def evaluate(cell):
    with open(log, "a") as fh:
        fh.write(f"{{os.getpid()}} {{cell.key}}\\n")
    time.sleep(0.05)
    return _with_outcomes(cell)

Path(sys.argv[3]).touch()
while not Path(sys.argv[4]).exists():
    time.sleep(0.01)
counts = fill_outcomes(grid(**CELLS), evaluate, path=Path(sys.argv[1]), experiment="fake", progress=False,
                       inputs=lambda c: "d1")
assert counts["replaced"] == 0 and counts["skipped"] == 0, counts
"""


def _with_outcomes(cell) -> dict:
    """A cell's result with its per-image outcomes: 100 images, the first ``k`` right (k from its key)."""
    import hashlib

    import numpy as np

    from dartlib.experiments.outcomes import CellOutcomes

    right = int(hashlib.sha256(cell.key.encode()).hexdigest()[:4], 16) % 101
    outcomes = CellOutcomes.from_stream(order=np.arange(100), correct=np.arange(100) < right, size=100)
    return {"n": 100, "accuracy": float(right), "outcomes": outcomes}


def test_two_outcomes_runs_share_the_cells_and_compute_each_once(tmp_path):
    from dartlib.experiments.outcomes import checked_outcomes, sidecar

    cells = grid(**CELLS)
    results = tmp_path / "o.csv"
    run_grid(cells, _with_outcomes, path=results, experiment="fake", progress=False, inputs=lambda c: "d1")
    sidecar(results).unlink()  # rows stored before outcomes were kept
    lines = _run(tmp_path, results, 2, OUTCOMES_WORKER)
    keys = [line.split()[1] for line in lines]
    assert sorted(keys) == sorted(c.key for c in cells)  # every cell once between the two, none twice
    per_process = pd.Series([line.split()[0] for line in lines]).value_counts()
    print(f"cells given outcomes per process: {sorted(per_process.tolist(), reverse=True)} of {len(cells)}")
    assert len(per_process) == 2 and per_process.min() >= len(cells) // 4  # both took a share
    assert len(checked_outcomes(read_results(results), results)) == len(cells)
