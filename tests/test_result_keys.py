"""A cached result is keyed by everything that made it: each setting a Table 1 cell reads, changed
alone, turns its stored row stale; two rows of one cell are refused naming the file."""

from __future__ import annotations

import copy
import dataclasses
import re

import numpy as np
import pytest
import torch

from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.data.files import DamagedFileError
from dartlib.experiments import cell_streams, engine
from dartlib.experiments.engine import TestTimeContext, evaluate_cell
from dartlib.experiments.grid import StaleRowsWarning, read_results, run_grid
from dartlib.experiments.grid_status import grid_status
from dartlib.experiments.source_logits import SharedSourceLogits
from dartlib.studies.table1 import table1_cells
from dartlib.models.backbones import small_cnn


@pytest.fixture()
def fmnistc_dir(tmp_path, monkeypatch):
    """A 10-class corrupted test set in the CIFAR-C layout (``fog``, 5 severities x 120 images),
    found through ``DART_FMNISTC_DIR`` (the committed smoke models stay where they are)."""
    folder = tmp_path / "FMNIST-C"
    folder.mkdir()
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 12).astype(np.int64)
    np.save(folder / "fog.npy", rng.integers(0, 255, size=(5 * len(labels), 32, 32, 3), dtype=np.uint8))
    np.save(folder / "labels.npy", np.tile(labels, 5))
    monkeypatch.setenv("DART_FMNISTC_DIR", str(folder))
    return folder


def _memo(source):
    """A shared f_theta0_bar memo of ``source``, made as the engine makes it."""
    return SharedSourceLogits(source, revision=engine.ENGINE_REVISION)


def _context() -> TestTimeContext:
    torch.manual_seed(0)
    return TestTimeContext(source=small_cnn(10, width=4).eval(),
                         refiner=Refiner(module=RefinementModule(10, hidden=8), config=DartConfig()),
                         trained={"iabn": small_cnn(10, width=4).eval()}, batch_size=40, options={"tent": {"lr": 1e-3}})


def _cells():
    cells = table1_cells(dataset="fmnistc", corruptions=["fog"], rhos=[1], methods=["tent", "note"])
    return {(c.method, c.refiner): c for c in cells}


def _bumped(module: torch.nn.Module) -> torch.nn.Module:
    """A copy with one weight moved (a retrained model is another object: digests are memoised per
    module object, whose weights a context never changes)."""
    module = copy.deepcopy(module)
    with torch.no_grad():
        next(module.parameters()).add_(1e-3)
    return module


def _change_test_data(folder) -> None:
    images = np.load(folder / "fog.npy")
    images[-1, 0, 0, 0] ^= 1  # one bit of one pixel of severity 5's last image
    np.save(folder / "fog.npy", images)
    cell_streams._corrupted_at.cache_clear()  # a new process reads the file afresh; this one caches it
    cell_streams._set_digest_at.cache_clear()


# Each change alone, applied to a fresh context: (what, the cell it must turn stale, how).
CHANGES = {
    "test batch size": (("tent", "dart"), lambda ctx, folder: setattr(ctx, "batch_size", 20)),
    "method options": (("tent", "none"), lambda ctx, folder: ctx.options.update(tent={"lr": 2e-3})),
    "source weights": (("tent", "none"), lambda ctx, folder: setattr(ctx, "source", _bumped(ctx.source))),
    "g_phi weights": (("tent", "dart"), lambda ctx, folder: setattr(ctx.refiner, "module", _bumped(ctx.refiner.module))),
    "g_phi settings": (("tent", "dart"), lambda ctx, folder: setattr(ctx.refiner, "config", DartConfig(alpha=1.0))),
    "test-time temperature": (("tent", "dart"), lambda ctx, folder: setattr(ctx.refiner, "temperature", 1.1)),
    "NOTE's IABN model": (("note", "none"), lambda ctx, folder: ctx.trained.update(iabn=_bumped(ctx.trained["iabn"]))),
    "test data": (("tent", "none"), lambda ctx, folder: _change_test_data(folder)),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_setting_a_table1_cell_reads_changed_alone_turns_it_stale(change, fmnistc_dir, tmp_path):
    which, apply = CHANGES[change]
    cell = _cells()[which]
    context = _context()
    path = tmp_path / "table1.csv"
    run_grid([cell], lambda c: {"n": 1, "accuracy": 50.0}, path=path, experiment="t", progress=False,
             inputs=context.inputs)
    assert grid_status([cell], path=path, inputs=context.inputs).current.sum() == 1
    apply(context, fmnistc_dir)
    assert grid_status([cell], path=path, inputs=context.inputs).stale.sum() == 1, change


def test_method_and_engine_revisions_turn_cells_stale(fmnistc_dir, tmp_path, monkeypatch):
    cell = _cells()[("tent", "none")]
    context = _context()
    before = context.inputs(cell)
    monkeypatch.setattr(engine, "ENGINE_REVISION", engine.ENGINE_REVISION + 1)
    assert context.inputs(cell) != before
    monkeypatch.undo()
    from dartlib import tta

    monkeypatch.setattr(tta.METHODS["tent"], "revision", tta.METHODS["tent"].revision + 1)
    assert context.inputs(cell) != before


def test_a_field_added_to_the_context_enters_the_digest_without_a_list(fmnistc_dir):
    """The digest reads every dataclass field: a subclass's new setting counts at once."""

    @dataclasses.dataclass
    class Wider(TestTimeContext):
        stream_limit: int = 0

    cell = _cells()[("tent", "none")]
    base = _context()
    wider = Wider(**{f.name: getattr(base, f.name) for f in dataclasses.fields(TestTimeContext) if f.init})
    other = dataclasses.replace(wider, stream_limit=5)
    assert wider.inputs(cell) != other.inputs(cell)


def test_the_cells_own_fields_are_its_key():
    """A cell's own fields (shift, rho, corruption, seed, params such as test_batch= or limit=) make
    its key: changed, it is another cell, never a stored row reused."""
    cell = _cells()[("tent", "dart")]
    for change in ({"shift_param": 10.0}, {"corruption": "snow"}, {"seed": 1}, {"params": "test_batch=16"},
                   {"params": "limit=100"}, {"severity": 4}, {"refiner": "dart-split"}):
        assert dataclasses.replace(cell, **change).key != cell.key, change


def test_a_row_under_another_test_batch_size_is_refused_and_recomputed(fmnistc_dir, tmp_path):
    cell = _cells()[("tent", "none")]
    context = _context()
    path = tmp_path / "table1.csv"
    run_grid([cell], lambda c: {"n": 1, "accuracy": 0.0}, path=path, experiment="t", progress=False,
             inputs=lambda c: dataclasses.replace(context, batch_size=-5).inputs(c))
    with pytest.warns(StaleRowsWarning, match=r"table1\.csv: 1 stored row\(s\) were computed under other inputs"):
        rows = run_grid([cell], lambda c: evaluate_cell(c, context), path=path, experiment="t", progress=False,
                        inputs=context.inputs)
    assert rows.accuracy.iloc[0] > 0 and len(read_results(path)) == 1


def test_two_rows_of_one_cell_are_refused_naming_the_file_and_both_lines(tmp_path):
    cell = _cells()[("tent", "none")]
    path = tmp_path / "table1.csv"
    run_grid([cell], lambda c: {"n": 120, "accuracy": 61.83}, path=path, experiment="t", progress=False)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[1].replace("61.83", "99.5")]) + "\n")
    with pytest.raises(DamagedFileError, match=r"table1\.csv is damaged: lines 2 and 3 hold the same cell .* "
                                               r"accuracies 61\.83, 99\.5"):
        read_results(path)


def test_a_row_stored_before_rows_had_keys_is_replaced_when_its_cell_is_computed(tmp_path):
    cells = _cells()
    cell, other = cells[("tent", "none")], cells[("note", "none")]
    path = tmp_path / "condensed.csv"
    run_grid([cell, other], lambda c: {"n": 120, "accuracy": 61.83}, path=path, experiment="t", progress=False)
    lines = path.read_text().splitlines()
    # the two rows as a file written before keys were kept: no seconds, key or inputs, numbers padded
    legacy = [",".join(line.split(",")[:12]).replace(",5,", ",5.0000,") + ",,," for line in lines[1:]]
    path.write_text("\n".join([lines[0], *legacy]) + "\n")
    assert set(read_results(path)["key"]) == {""}
    run_grid([cell], lambda c: {"n": 120, "accuracy": 62.5}, path=path, experiment="t", progress=False)
    stored = read_results(path)
    assert len(stored) == 2  # the recomputed row replaced its keyless copy; the other stays
    assert stored.set_index("method").loc["tent", ["key", "accuracy"]].tolist() == [cell.key, 62.5]
    assert stored.set_index("method").loc["note", "key"] == ""

@pytest.mark.parametrize("n", ["nan", "-600", "inf", "12.5"])
def test_a_row_whose_count_is_not_a_finite_count_is_refused_naming_the_line(n, tmp_path):
    cell = _cells()[("tent", "none")]
    path = tmp_path / "table1.csv"
    run_grid([cell], lambda c: {"n": 120, "accuracy": 61.83}, path=path, experiment="t", progress=False)
    header, row = path.read_text().splitlines()
    fields = row.split(",")
    fields[header.split(",").index("n")] = n
    path.write_text(f"{header}\n{','.join(fields)}\n")
    with pytest.raises(DamagedFileError, match=rf"table1\.csv is damaged: line 2 has n '{re.escape(n)}', not a finite count"):
        read_results(path)


def test_the_shared_source_memo_persists_merges_and_serves_bit_identical_logits(tmp_path):

    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    x1, x2 = torch.rand(8, 3, 32, 32), torch.rand(8, 3, 32, 32)
    first, second = _memo(source), _memo(source)
    a, b = first(x1), second(x2)
    first.save(tmp_path)
    second.save(tmp_path)  # merged with what the first saved, not overwriting it
    third = _memo(source)
    assert third.load(tmp_path) == 2
    assert torch.equal(third(x1), a) and torch.equal(third(x2), b) and third.hits == 2
    other = _memo(small_cnn(10, width=4).eval())  # other weights: another file
    assert other.load(tmp_path) == 0


def _memo_with_two_entries(tmp_path):

    torch.manual_seed(0)
    source = small_cnn(10, width=4).eval()
    x1, x2 = torch.rand(8, 3, 32, 32), torch.rand(8, 3, 32, 32)
    memo = _memo(source)
    truth = memo(x1), memo(x2)
    return source, (x1, x2), truth, memo.save(tmp_path)


def _tamper(path, *, negate=True, digest=True, made_by=None):
    """Rewrite a saved memo: its logits negated; with ``digest`` the stored sha256 made to match
    the new contents (a consistent lie that only a recomputation can catch)."""

    blob = torch.load(path, weights_only=True)
    blob["memo"] = {k: -v if negate else v for k, v in blob["memo"].items()}
    if digest:
        blob["sha256"] = SharedSourceLogits.contents_digest(blob["memo"])
    if made_by is not None:
        blob["made_by"] = made_by
    torch.save(blob, path)


def test_a_negated_memo_with_a_matching_digest_fails_its_spot_check_and_is_rebuilt(tmp_path):
    from dartlib.data.files import CacheDiscardedWarning

    source, (x1, x2), truth, path = _memo_with_two_entries(tmp_path)
    _tamper(path, digest=True)
    memo = _memo(source)
    assert memo.load(tmp_path) == 2  # what made it and its digest agree: read
    with pytest.warns(CacheDiscardedWarning, match=rf"{re.escape(str(path))}: the shared source-logits memo gave "
                                                  r"logits .* from a fresh forward pass .*spot check.*discarded") as caught:
        assert torch.equal(memo(x1), truth[0])  # the fresh logits, not the file's
    assert len(caught) == 1 and not path.exists()
    assert torch.equal(memo(x2), truth[1])  # every entry of the file dropped: computed afresh
    memo.save(tmp_path)  # rebuilt, correct
    again = _memo(source)
    assert again.load(tmp_path) == 2 and torch.equal(again(x1), truth[0]) and torch.equal(again(x2), truth[1])


def test_a_grid_context_writes_its_memo_anew_after_a_discard(tmp_path):
    """The context that read a memo which then failed its spot check writes the rebuilt one at the end."""
    from dartlib.data.files import CacheDiscardedWarning

    source, (x1, x2), truth, path = _memo_with_two_entries(tmp_path)
    _tamper(path, digest=True)
    context = TestTimeContext(source=source, refiner=None, logits_store=tmp_path)
    shared = context.shared_source()
    with pytest.warns(CacheDiscardedWarning):
        shared(x1)
    shared(x2)
    assert not path.exists()
    context.save_shared_source()
    again = _memo(source)
    assert again.load(tmp_path) == 2 and torch.equal(again(x1), truth[0]) and torch.equal(again(x2), truth[1])


@pytest.mark.parametrize("fault", ["contents", "engine", "old-format", "unreadable"])
def test_a_memo_that_fails_its_record_is_discarded_when_read(tmp_path, fault):
    from dartlib.data.files import CacheDiscardedWarning

    source, (x1, _), truth, path = _memo_with_two_entries(tmp_path)
    if fault == "contents":
        _tamper(path, digest=False)
        match = "has contents that do not match the sha256 stored with them"
    elif fault == "engine":
        made_by = {**_memo(source).made_by(), "engine": engine.ENGINE_REVISION - 1}
        _tamper(path, negate=False, made_by=made_by)
        match = "was made by .* not by this computation's"
    elif fault == "old-format":
        torch.save({"memo": torch.load(path, weights_only=True)["memo"]}, path)
        match = "holds no record of what made it"
    else:
        path.write_bytes(path.read_bytes()[:100])
        match = "is unreadable"
    memo = _memo(source)
    with pytest.warns(CacheDiscardedWarning, match=rf"{re.escape(str(path))}: the shared source-logits memo {match}"):
        assert memo.load(tmp_path) == 0
    assert not path.exists() and len(memo) == 0
    assert torch.equal(memo(x1), truth[0])
