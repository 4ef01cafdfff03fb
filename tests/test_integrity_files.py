"""A trained file is what its name says, a resume state is continued only when it checks out, and a
lock never writes through a link (issue 62, items 1-3). Real files: the smoke profile's committed
refiners and IABN copy in tmp copies, a real interrupted g_phi pass and IABN fine-tuning."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from dartlib.dart import intermediate, refiner_training
from dartlib.dart.refiner import DartConfig
from dartlib.data.files import DamagedFileError, DiscardedStateWarning, open_lock
from dartlib.data.dataset import Dataset
from dartlib.experiments.grid import _results_lock
from dartlib.experiments.cell_claims import CellClaims
from dartlib.models import states
from dartlib.models.artefacts import COMMITTED_DIR
from dartlib.models.backbones import small_cnn
from dartlib.models.checkpoints import load_checkpoint, load_weights, save_weights
from dartlib.tta import note

SMOKE = "fmnist-small-cnn-smoke-seed0"
ALPHA_01, OTHER = f"{SMOKE}.dart-8c46813eadc6.pt", f"{SMOKE}.dart-0c6526e09dca.pt"


@pytest.fixture()
def smoke_dir(tmp_path):
    """The smoke source model, two of its refiners and its IABN copy, with the committed manifest."""
    for name in (f"{SMOKE}.pt", ALPHA_01, OTHER, f"{SMOKE}.iabn-k4-e1-pc500.pt", "MANIFEST.json"):
        shutil.copy(COMMITTED_DIR / name, tmp_path / name)
    return tmp_path


def _config(path: Path) -> DartConfig:
    return DartConfig(**load_weights(path)["config"])


def test_a_refiner_copied_over_another_name_is_refused_and_set_aside(smoke_dir):
    ckpt = smoke_dir / f"{SMOKE}.pt"
    good, _ = intermediate._load(smoke_dir / OTHER, checkpoint=ckpt)
    assert good.config == _config(COMMITTED_DIR / OTHER)
    shutil.copy(smoke_dir / OTHER, smoke_dir / ALPHA_01)  # another smoke refiner under alpha 0.1's name
    with pytest.raises(DamagedFileError, match=rf"{ALPHA_01} is damaged: its sha256 differs from the one MANIFEST"):
        intermediate._load(smoke_dir / ALPHA_01, checkpoint=ckpt)  # listed: the manifest refuses it first
    (smoke_dir / "MANIFEST.json").unlink()  # unlisted (a cached refiner): its own config gives it away
    next(smoke_dir.glob(f"{ALPHA_01}.refused-*")).rename(smoke_dir / ALPHA_01)
    with pytest.raises(DamagedFileError, match=rf"{ALPHA_01} is damaged: it holds another refiner \(dart, alpha "
                                               rf".*whose name is {OTHER}; set aside as {ALPHA_01}\.refused-"):
        intermediate._load(smoke_dir / ALPHA_01, checkpoint=ckpt)
    assert not (smoke_dir / ALPHA_01).exists()
    (aside,) = smoke_dir.glob(f"{ALPHA_01}.refused-*")
    assert aside.read_bytes() == (COMMITTED_DIR / OTHER).read_bytes()


def test_a_refiner_edited_under_its_own_config_is_refused_by_the_manifest(smoke_dir):
    path = smoke_dir / ALPHA_01
    blob = load_weights(path)
    blob["module"] = {k: v * 1.5 for k, v in blob["module"].items()}  # name and config kept, weights scaled
    save_weights(blob, path=path)
    with pytest.raises(DamagedFileError, match="its sha256 differs from the one MANIFEST.json records") as err:
        intermediate._load(path, checkpoint=smoke_dir / f"{SMOKE}.pt")
    assert not path.exists()
    # retraining it would not end the refusal (a new file's bytes differ too): the remedy says so
    assert "artefacts manifest" in err.value.remedy and "run the same command again" not in err.value.remedy


def test_a_cached_refiner_edited_under_its_own_name_is_refused_by_its_digest(tmp_path):
    """A refiner outside MANIFEST.json (fit_refiner's cache, a profile's new refiner) carries the
    digest of its contents: scaled weights under the right name and config are refused and set
    aside; a refiner saved before the digest was added (none stored) is read as before."""
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(4), 100).astype(np.int64)
    train = Dataset("tiny", "train", rng.integers(0, 255, size=(400, 32, 32, 3), dtype=np.uint8), labels, tuple("abcd"))
    torch.manual_seed(0)
    model, config = small_cnn(4, width=4).eval(), replace(BASE, epochs=1)
    checkpoint = tmp_path / "tiny.pt"
    intermediate.load_or_train_refiner(checkpoint, model, train, config, progress=False)
    path = intermediate.refiner_path(checkpoint, config)
    blob = load_weights(path)
    assert blob[states.DIGEST] == states.state_digest(blob)
    intermediate._load(path, checkpoint=checkpoint)
    save_weights({k: v for k, v in blob.items() if k != states.DIGEST}, path=path)  # as saved before the digest
    intermediate._load(path, checkpoint=checkpoint)
    blob["module"] = {k: v * 1.5 for k, v in blob["module"].items()}  # name, config and old digest kept
    save_weights(blob, path=path)
    with pytest.raises(DamagedFileError, match=r"do not match the digest stored with them .*set aside as"):
        intermediate._load(path, checkpoint=checkpoint)
    assert not path.exists()


def test_an_iabn_copy_under_another_epoch_count_is_refused(smoke_dir):
    ckpt = smoke_dir / f"{SMOKE}.pt"
    model, _ = load_checkpoint(ckpt)
    net, meta = note.load_or_finetune_iabn(ckpt, model, None, epochs=1, per_class=500, device="cpu", progress=False)
    assert meta["epochs"] == 1 and note.has_iabn(net)
    shutil.copy(smoke_dir / f"{SMOKE}.iabn-k4-e1-pc500.pt", smoke_dir / f"{SMOKE}.iabn-k4-e30-pc500.pt")
    with pytest.raises(DamagedFileError, match=r"iabn-k4-e30-pc500\.pt is damaged: it holds another IABN copy "
                                               r"\(k 4, 1 epochs\), whose name is .*iabn-k4-e1-pc500\.pt; set aside"):
        note.load_or_finetune_iabn(ckpt, model, None, epochs=30, per_class=500, device="cpu", progress=False)
    assert not (smoke_dir / f"{SMOKE}.iabn-k4-e30-pc500.pt").exists()


# --------------------------------------------------------------------------- resume states


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 100)
    images = rng.integers(0, 255, size=(400, 32, 32, 3), dtype=np.uint8)
    torch.manual_seed(0)
    return small_cnn(4, width=4).eval(), Dataset("tiny", "train", images, labels.astype(np.int64), tuple("abcd"))


BASE = DartConfig(epochs=2, batch_size=32, hidden=16, n_dir=5, per_class=50)
CONFIGS = [BASE, replace(BASE, variant="dart-split")]  # 6 steps per epoch


@pytest.fixture(scope="module")
def interrupted(tiny, tmp_path_factory):
    """The state of a real pass after its first epoch (written by :func:`refiner_training._save_pass`)
    and the logs of the pass run through."""
    model, ds = tiny
    whole = refiner_training.train_refiners(model, ds, CONFIGS, progress=False)
    path = tmp_path_factory.mktemp("pass") / "p.partial.pt"
    real = refiner_training._Learner.update
    calls = []

    def die_in_epoch_2(self, epoch, batch):
        calls.append(1)
        if len(calls) > 8 * len(CONFIGS):
            raise KeyboardInterrupt
        real(self, epoch, batch)

    refiner_training._Learner.update = die_in_epoch_2
    try:
        with pytest.raises(KeyboardInterrupt):
            refiner_training.train_refiners(model, ds, CONFIGS, progress=False, resume=path)
    finally:
        refiner_training._Learner.update = real
    state = load_weights(path)
    assert state["epochs_done"] == 1 and [s["step"] for s in state["learners"]] == [6, 6]
    assert state[states.DIGEST] == states.state_digest(state)
    return path.read_bytes(), [log for _, log in whole]


def _resume(tiny, tmp_path, state: dict, *, digest: bool) -> tuple[list, Path]:
    model, ds = tiny
    path = tmp_path / "p.partial.pt"
    save_weights(states.sealed(state) if digest else {k: v for k, v in state.items() if k != states.DIGEST}, path=path)
    out = refiner_training.train_refiners(model, ds, CONFIGS, progress=False, resume=path)
    return [log for _, log in out], path


def _state(interrupted, tmp_path) -> dict:
    (tmp_path / "src.pt").write_bytes(interrupted[0])
    return load_weights(tmp_path / "src.pt")


def test_an_intact_state_resumes_with_or_without_its_digest(tiny, interrupted, tmp_path, recwarn):
    for digest in (True, False):  # without: a state saved before states were sealed
        logs, path = _resume(tiny, tmp_path, _state(interrupted, tmp_path), digest=digest)
        assert logs == interrupted[1] and load_weights(path)["epochs_done"] == 2
    assert not [w for w in recwarn if issubclass(w.category, DiscardedStateWarning)]


def _raise_epochs(s):
    s["epochs_done"] = 2


def _nan_weights(s):
    first = next(iter(s["learners"][0]["module"]))
    s["learners"][0]["module"][first][0] = float("nan")


def _no_learners(s):
    s["learners"] = []


def _scaled(s):
    s["learners"][1]["module"] = {k: v * 2 for k, v in s["learners"][1]["module"].items()}


@pytest.mark.parametrize("tamper, digest, problem", [
    (_raise_epochs, False, r"learner 1 \(dart, alpha 0.1\) is at step 6, 2 epochs of 6 steps give 12"),
    (_nan_weights, False, r"learner 1 .*'s module's .* holds NaN or infinite values"),
    (_no_learners, False, r"it holds 0 learners, the pass trains 2"),
    (_scaled, True, r"its contents do not match the digest stored with them"),
    (_raise_epochs, True, r"its contents do not match the digest"),
])
def test_a_tampered_state_is_set_aside_and_the_pass_starts_over(tiny, interrupted, tmp_path, tamper, digest, problem):
    state = _state(interrupted, tmp_path)
    stored = state[states.DIGEST]
    tamper(state)
    if digest:
        state[states.DIGEST] = stored  # the digest of the untampered state
    else:
        del state[states.DIGEST]  # as saved before states were sealed: the invariants alone decide
    path = tmp_path / "p.partial.pt"
    with pytest.warns(DiscardedStateWarning, match=rf"p\.partial\.pt is damaged: {problem}[^;]*; set aside as "
                                                  r"p\.partial\.pt\.refused-.*, the refiners' training starts over"):
        save_weights(state, path=path)
        logs = [log for _, log in refiner_training.train_refiners(*tiny, CONFIGS, progress=False, resume=path)]
    assert logs == interrupted[1]  # started over: the pass run through
    assert len(list(tmp_path.glob("p.partial.pt.refused-*"))) == 1


def test_a_padded_iabn_log_does_not_look_finished(tiny, tmp_path, monkeypatch):
    model, ds = tiny
    resume = tmp_path / "x.iabn-k4-e3.partial.pt"
    real = note.save_weights

    def save_then_stop(obj, *, path):  # interrupted once its first epoch is saved
        real(obj, path=path)
        raise KeyboardInterrupt

    monkeypatch.setattr(note, "save_weights", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        note.finetune_iabn(note.to_iabn(model), ds, epochs=3, batch_size=100, device="cpu", progress=False,
                           resume=resume)
    monkeypatch.setattr(note, "save_weights", real)
    state = load_weights(resume)
    assert state["epochs_done"] == 1 and len(state["log"]) == 1
    for sealed_again in (True, False):
        padded = {**state, "log": [state["log"][0], {**state["log"][0], "epoch": 2}, {**state["log"][0], "epoch": 3}]}
        if not sealed_again:
            padded = {k: v for k, v in padded.items() if k != states.DIGEST}
        save_weights(padded, path=resume)
        with pytest.warns(DiscardedStateWarning, match="x.iabn-k4-e3.partial.pt is damaged: (its contents do not match "
                                                       "the digest|its log has 3 entries for 1 epochs done)"):
            _, log = note.finetune_iabn(note.to_iabn(model), ds, epochs=3, batch_size=100, device="cpu",
                                        progress=False, resume=resume)
        assert [e["epoch"] for e in log] == [1, 2, 3] and load_weights(resume)["epochs_done"] == 3


# --------------------------------------------------------------------------- locks


def test_a_results_lock_that_is_a_link_is_never_written_through(tmp_path):
    target = tmp_path / "table1.csv.bak"
    target.write_text("kept\n")
    results = tmp_path / "table1.csv"
    lock = tmp_path / ".table1.csv.lock"
    lock.symlink_to(target)
    with pytest.raises(DamagedFileError, match=r"\.table1\.csv\.lock is damaged: the lock file is a symbolic link"):
        with _results_lock(results):
            pass
    assert target.read_text() == "kept\n"


def test_a_dangling_claims_lock_link_creates_nothing(tmp_path):
    results = tmp_path / "grid.csv"
    target = tmp_path / "elsewhere" / "created"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".grid.csv.claims.lock").symlink_to(target)
    with pytest.raises(DamagedFileError, match="symbolic link"):
        with CellClaims(results):
            pass
    assert not target.exists() and not os.path.lexists(target)


def test_a_lock_outside_its_folder_is_refused_and_a_plain_one_works(tmp_path):
    with pytest.raises(ValueError, match="not inside the folder it guards"):
        open_lock(tmp_path / "a" / ".x.lock", folder=tmp_path)
    results = tmp_path / "grid.csv"
    with CellClaims(results) as claims:
        assert claims.claim("k1") and claims.claim("k1")  # a process's own claim
    with _results_lock(results):
        pass
    assert (tmp_path / ".grid.csv.lock").stat().st_size == 0 and not (tmp_path / ".grid.csv.lock").is_symlink()


def test_a_temporary_file_is_never_a_planted_link(tmp_path, monkeypatch):
    from dartlib.data import files

    target = tmp_path / "victim"
    target.write_text("kept")
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: "0" * (2 * n))  # a name an attacker could guess
    planted = tmp_path / f".out.{os.getpid()}-00000000.tmp.json"
    planted.symlink_to(target)
    with pytest.raises(FileExistsError):
        files.write_text_atomic(tmp_path / "out.json", json.dumps({"a": 1}))
    assert target.read_text() == "kept"


def test_the_memo_lock_is_never_written_through_a_link(tiny, tmp_path):
    from dartlib.experiments.engine import ENGINE_REVISION
    from dartlib.experiments.source_logits import SharedSourceLogits

    memo = SharedSourceLogits(tiny[0], revision=ENGINE_REVISION)
    target = tmp_path / "victim.csv"
    target.write_text("kept\n")
    path = memo.store_path(tmp_path)
    path.with_name(f".{path.name}.lock").symlink_to(target)
    with pytest.raises(DamagedFileError, match=r"\.lock is damaged: the lock file is a symbolic link"):
        memo.save(tmp_path)
    assert target.read_text() == "kept\n" and not path.exists()


def test_a_source_training_state_is_checked_before_it_is_continued(tiny):
    from dartlib.models.training import _check_partial

    model = small_cnn(4, width=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.zeros(2, 3, 32, 32)).sum().backward()
    opt.step()
    history = [{"epoch": 1, "train_loss": 1.0, "seconds": 2.0}, {"epoch": 2, "train_loss": 0.9, "seconds": 4.0}]
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 2, "history": history, "seconds": 4.0}
    _check_partial(state, model, opt, epochs=3)
    bad = [({"epoch": 4}, r"its epoch is 4, not a whole number from 1 to 3"),
           ({"epoch": -1}, r"its epoch is -1"),
           ({"history": history[:1]}, r"its history has 1 entries for 2 epochs done"),
           ({"history": [history[0], history[0]]}, r"its history's entry 2 is not that of epoch 2"),
           ({"model": {k: v * float("nan") for k, v in model.state_dict().items()}}, r"holds NaN"),
           ({"model": {k: v[:1] if v.dim() else v for k, v in model.state_dict().items()}}, r"has shape")]
    for change, problem in bad:
        with pytest.raises(states.StateProblem, match=problem):
            _check_partial({**state, **change}, model, opt, epochs=3)
