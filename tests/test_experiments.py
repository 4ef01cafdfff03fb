"""The experiment runner: keyed cells, atomic appends, resuming after an interruption."""

from __future__ import annotations

import pytest

from dartlib.experiments.grid import SCHEMA, Cell, grid, read_results, run_grid


def _grid():
    return grid(dataset=["fmnistc"], shift=["lt"], shift_param=[1.0, 10.0, 100.0],
                corruption=["fog", "snow"], severity=[5], method=["bnadapt"], refiner=["none", "dart"])


def test_grid_and_keys():
    cells = _grid()
    assert len(cells) == 12
    assert len({c.key for c in cells}) == 12
    assert Cell("a", "lt", 1.0, "fog", 5, "tent").key == Cell("a", "lt", 1.0, "fog", 5, "tent").key
    assert Cell("a", "lt", 1.0, "fog", 5, "tent").key != Cell("a", "lt", 1.0, "fog", 5, "tent", seed=1).key
    with pytest.raises(ValueError, match="valid: dataset, shift"):
        grid(datasets=["x"])


def test_killed_run_resumes_without_recomputing(tmp_path):
    path = tmp_path / "results" / "exp.csv"
    calls = []

    def evaluate(cell):
        calls.append(cell.key)
        if len(calls) == 5:
            raise KeyboardInterrupt  # the process is killed while evaluating the fifth cell
        return {"n": 100, "accuracy": 50.0 + cell.shift_param / 10}

    with pytest.raises(KeyboardInterrupt):
        run_grid(_grid(), evaluate, path=path, experiment="exp", progress=False)
    partial = read_results(path)
    assert len(partial) == 4 and list(partial.columns) == SCHEMA
    first_four = set(calls[:4])

    calls.clear()
    done = run_grid(_grid(), lambda c: {"n": 100, "accuracy": 1.0} if calls.append(c.key) is None else None,
                    path=path, experiment="exp", progress=False)
    assert len(calls) == 8 and not (set(calls) & first_four)
    assert len(done) == 12 and len(read_results(path)) == 12
    calls.clear()
    run_grid(_grid(), lambda c: calls.append(c) or {}, path=path, experiment="exp", progress=False)
    assert calls == []  # a finished grid computes nothing


def test_results_keep_the_schema_values(tmp_path):
    path = tmp_path / "exp.csv"
    cells = [Cell("cifar10c", "none", None, "fog", 5, "noadapt")]
    run_grid(cells, lambda c: {"n": 10, "accuracy": 12.5}, path=path, experiment="exp", progress=False)
    row = read_results(path).iloc[0]
    assert row.experiment == "exp" and row.method == "noadapt" and row.accuracy == 12.5
    assert row.refiner == "none" and row.params == "" and row.severity == 5
    assert row.shift_param != row.shift_param  # no rho for an unshifted stream: NaN


def test_shards_split_a_grid_and_share_one_results_file(tmp_path):
    """Two workers on interleaved shards append to one file concurrently; no row is lost."""
    import threading
    import time

    from dartlib.experiments.grid import shard

    cells = _grid()
    parts = [shard(cells, f"{i}/2") for i in range(2)]
    assert sorted(c.key for p in parts for c in p) == sorted(c.key for c in cells) and all(parts)
    path = tmp_path / "r.csv"

    def work(part):
        run_grid(part, lambda c: time.sleep(0.01) or {"n": 1, "accuracy": 50.0}, path=path, experiment="exp",
                 progress=False)

    threads = [threading.Thread(target=work, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = read_results(path)
    assert sorted(done.key) == sorted(c.key for c in cells)
    for bad in ("2/2", "1", "a/b"):
        with pytest.raises(ValueError, match="i/n"):
            shard(cells, bad)


def test_rows_computed_with_other_inputs_are_recomputed_and_replaced(tmp_path):
    path = tmp_path / "grid.csv"
    cells = grid(dataset=["d"], shift=["lt"], shift_param=[1.0], corruption=["fog", "snow"], severity=[5],
                 method=["bnadapt"], refiner=["dart"])
    calls = []

    def evaluate(cell):
        calls.append(cell.corruption)
        return {"n": 10, "accuracy": 50.0 + len(calls)}

    run_grid(cells, evaluate, path=path, experiment="x", progress=False, inputs=lambda c: "g1")
    assert calls == ["fog", "snow"]
    run_grid(cells, evaluate, path=path, experiment="x", progress=False, inputs=lambda c: "g1")
    assert len(calls) == 2  # same inputs: nothing recomputed
    again = run_grid(cells, evaluate, path=path, experiment="x", progress=False,
                     inputs=lambda c: "g2" if c.corruption == "fog" else "g1")
    assert calls == ["fog", "snow", "fog"]
    stored = read_results(path)
    assert len(stored) == 2 and set(stored.inputs) == {"g1", "g2"}  # the old fog row was replaced
    assert again.set_index("corruption").accuracy["fog"] == 53.0


def test_a_run_stopped_part_way_leaves_no_stale_row_in_the_file(tmp_path):
    """Stale rows leave the file when a run finds them, so readers of the file (pages, the ledger) never mix
    rows of the old inputs with those of the new."""
    from dartlib.experiments.outcomes import read_sidecar

    path = tmp_path / "grid.csv"
    cells = grid(dataset=["d"], shift=["lt"], shift_param=[1.0], corruption=["fog", "snow", "frost"], severity=[5],
                 method=["bnadapt"], refiner=["dart"])
    run_grid(cells, lambda c: {"n": 10, "accuracy": 50.0}, path=path, experiment="x", progress=False,
             inputs=lambda c: "g1")

    def stop_after_one(cell):
        if cell.corruption != "fog":
            raise KeyboardInterrupt
        return {"n": 10, "accuracy": 60.0}

    with pytest.warns(UserWarning, match="removed from the file"), pytest.raises(KeyboardInterrupt):
        run_grid(cells, stop_after_one, path=path, experiment="x", progress=False, inputs=lambda c: "g2")
    stored = read_results(path)
    assert stored.inputs.tolist() == ["g2"] and stored.accuracy.tolist() == [60.0]
    assert set(read_sidecar(path)["key"]) <= set(stored.key)


def test_rows_without_an_input_digest_are_reused_only_where_no_digest_is_known(tmp_path):
    path = tmp_path / "grid.csv"
    cells = grid(dataset=["d"], shift=["lt"], shift_param=[1.0], corruption=["fog"], severity=[5], method=["noadapt"])
    run_grid(cells, lambda c: {"n": 1, "accuracy": 1.0}, path=path, experiment="x", progress=False)
    assert read_results(path).inputs.tolist() == [""]
    run_grid(cells, lambda c: pytest.fail("recomputed"), path=path, experiment="x", progress=False)
    again = run_grid(cells, lambda c: {"n": 1, "accuracy": 2.0}, path=path, experiment="x", progress=False,
                     inputs=lambda c: "g1")  # the stored row cannot show which inputs made it
    assert again.accuracy.tolist() == [2.0] and read_results(path).inputs.tolist() == ["g1"]


def test_grid_status_counts_current_stale_and_missing_cells_without_running(tmp_path):
    from dartlib.experiments.grid_status import grid_status

    path = tmp_path / "grid.csv"
    cells = _grid()
    first = [c for c in cells if c.refiner == "none"] + [c for c in cells if c.refiner == "dart"][:2]
    run_grid(first, lambda c: {"n": 1, "accuracy": 1.0}, path=path, experiment="x", progress=False,
             inputs=lambda c: "g1")
    # DART's inputs changed since (a retrained g_phi): its two stored cells are stale
    status = grid_status(cells, path=path, inputs=lambda c: "g2" if c.refiner == "dart" else "g1")
    assert status.loc[("bnadapt", "none")].tolist() == [6, 0, 0, 0, 6, 0]
    assert status.loc[("bnadapt", "dart")].tolist() == [0, 2, 0, 4, 6, 0]
    assert list(status.columns) == ["current", "stale", "suspect", "missing", "cells", "borrowable"]
    assert len(read_results(path)) == 8  # nothing ran


def test_reuse_copies_rows_of_the_same_cell_and_digest_from_another_grid_only(tmp_path):
    other, path = tmp_path / "other.csv", tmp_path / "grid.csv"
    cells = grid(dataset=["d"], shift=["online-imb"], shift_param=[1.0, 5.0, 20.0], corruption=["fog"], severity=[5],
                 method=["bnadapt"], refiner=["dart"], params=["subset=10"])
    digest = {1.0: "g1", 5.0: "g1", 20.0: "g2"}
    run_grid([cells[0], cells[2]], lambda c: {"n": 10, "accuracy": 40.0 + c.shift_param}, path=other,
             experiment="online", progress=False, inputs=lambda c: "g1")
    calls = []
    done = run_grid(cells, lambda c: calls.append(c.shift_param) or {"n": 10, "accuracy": 70.0}, path=path,
                    experiment="imb", progress=False, inputs=lambda c: digest[c.shift_param], reuse=[other])
    assert calls == [5.0, 20.0]  # 5: not in the other grid; 20: stored there with another digest
    assert done.set_index("shift_param").accuracy.to_dict() == {1.0: 41.0, 5.0: 70.0, 20.0: 70.0}
    assert set(done.experiment) == {"imb"} and len(read_results(other)) == 2
    again = run_grid(cells, lambda c: pytest.fail("recomputed"), path=path, experiment="imb", progress=False,
                     inputs=lambda c: digest[c.shift_param], reuse=[other])
    assert again.accuracy.tolist() == done.accuracy.tolist()
    # without a known digest nothing is borrowed
    bare = tmp_path / "bare.csv"
    run_grid(cells[:1], lambda c: calls.append("bare") or {"n": 10, "accuracy": 1.0}, path=bare, experiment="imb",
             progress=False, reuse=[other])
    assert calls[-1] == "bare"


def test_results_come_back_in_the_requested_order_however_they_were_computed(tmp_path):
    path = tmp_path / "grid.csv"
    cells = grid(dataset=["d"], shift=["online-imb"], shift_param=[1.0, 5.0, 20.0, 5000.0], corruption=["fog"],
                 severity=[5], method=["bnadapt"])
    run_grid(cells[2:], lambda c: {"n": 1, "accuracy": c.shift_param / 100}, path=path, experiment="x", progress=False)
    done = run_grid(cells, lambda c: {"n": 1, "accuracy": c.shift_param / 100}, path=path, experiment="x", progress=False)
    assert read_results(path).shift_param.tolist() == [20.0, 5000.0, 1.0, 5.0]  # stored as computed
    assert done.shift_param.tolist() == [1.0, 5.0, 20.0, 5000.0]
    assert done.accuracy.tolist() == [0.01, 0.05, 0.2, 50.0]


def test_a_row_without_shift_param_leaves_the_other_rows_written_as_they_were(tmp_path):
    path = tmp_path / "exp.csv"
    unshifted = [Cell("fmnistc", "none", None, "fog", 5, "noadapt")]
    run_grid(_grid()[:2] + unshifted, lambda c: {"n": 10, "accuracy": 12.5}, path=path, experiment="exp",
             progress=False)
    before = path.read_text().splitlines()
    # the unshifted cell recomputed (its inputs changed): its row is replaced, the file rewritten
    run_grid(unshifted, lambda c: {"n": 10, "accuracy": 40.0}, path=path, experiment="exp", progress=False,
             inputs=lambda c: "new")
    after = path.read_text().splitlines()
    assert after[:3] == before[:3]  # rho 1 stays "1", not "1.0": a rewrite does not reformat other rows
    assert after[3].split(",")[3] == "" and len(after) == 4


def test_a_cells_options_are_parsed_once_and_read_only():
    from dartlib.experiments.grid import Cell

    a = Cell("fmnist", "lt", 10.0, "fog", 5, "tent", params="limit=600,test_batch=16")
    b = Cell("fmnist", "lt", 100.0, "snow", 5, "bnadapt", params="limit=600,test_batch=16")
    assert a.options == {"limit": 600, "test_batch": 16} and a.options is b.options
    assert Cell("fmnist", "lt", 1.0, "fog", 5, "tent").options == {}
    with pytest.raises(TypeError):
        a.options["limit"] = 1  # a study cannot change what another cell reads


def test_a_row_is_borrowed_under_another_refiner_name_only_with_the_same_trained_inputs(tmp_path):
    """A profile's `dart` that is the paper's g_phi (same weights and settings: the same digest)
    takes the rows another grid computed under the variant's name, stored under its own name and
    key with their outcome lines; another digest, or another field, is computed."""
    from dataclasses import replace

    import numpy as np

    from dartlib.experiments.grid_status import grid_status
    from dartlib.experiments.outcomes import CellOutcomes, read_sidecar

    other, path = tmp_path / "paper_config.csv", tmp_path / "table1.csv"
    variant = grid(dataset=["d"], shift=["lt"], shift_param=[1.0, 100.0], corruption=["fog"], severity=[5],
                   method=["bnadapt"], refiner=["alpha0.1-epochs50"])
    mask = CellOutcomes(members=np.ones(10, dtype=np.int64), correct=(np.arange(10) < 4).astype(np.int64))

    def evaluate(c):
        return {"n": 10, "accuracy": 40.0, "outcomes": mask}

    run_grid(variant, evaluate, path=other, experiment="paper_config", progress=False, inputs=lambda c: "paper")
    profile = grid(dataset=["d"], shift=["lt"], shift_param=[1.0, 100.0], corruption=["fog"], severity=[5],
                   method=["bnadapt"], refiner=["dart"])
    digest = {1.0: "paper", 100.0: "shortcut"}  # rho 100's dart is another g_phi
    calls = []
    done = run_grid(profile, lambda c: calls.append(c.shift_param) or evaluate(c), path=path, experiment="table1",
                    progress=False, inputs=lambda c: digest[c.shift_param], reuse=[other])
    assert calls == [100.0]
    assert set(done.refiner) == {"dart"} and set(done.key) == {c.key for c in profile}
    fresh = tmp_path / "fresh.csv"  # --status says what a run would borrow, and writes nothing
    status = grid_status(profile, path=fresh, inputs=lambda c: digest[c.shift_param], reuse=[other])
    assert status.loc[("bnadapt", "dart")].tolist() == [0, 0, 0, 2, 2, 1] and not fresh.exists()
    side = read_sidecar(path)
    assert set(side.key) == {c.key for c in profile} and len(side) == 2
    assert run_grid(profile, lambda c: pytest.fail("recomputed"), path=path, experiment="table1", progress=False,
                    inputs=lambda c: digest[c.shift_param], reuse=[other]).accuracy.tolist() == [40.0, 40.0]
    # in one grid: its own rows of another name serve a cell of the same g_phi
    both = tmp_path / "paper_config_both.csv"
    run_grid(variant, evaluate, path=both, experiment="paper_config", progress=False, inputs=lambda c: "paper")
    run_grid(profile[:1], lambda c: calls.append("own") or evaluate(c), path=both, experiment="paper_config",
             progress=False, inputs=lambda c: "paper")
    assert calls[-1] != "own" and len(read_results(both)) == 3
    # another field (the seed) is another cell, whatever its digest
    seeded = [replace(c, seed=1) for c in profile[:1]]
    run_grid(seeded, lambda c: calls.append("seed1") or evaluate(c), path=path, experiment="table1", progress=False,
             inputs=lambda c: "paper", reuse=[other])
    assert calls[-1] == "seed1"
