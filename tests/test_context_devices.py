"""Every test-time context and every stream evaluation of the notebooks' experiments runs on the
machine's device, decided in one place (:func:`dartlib.devices.default_device`: ``$DART_DEVICE``,
else the GPU when there is one): the hand-built contexts of notebooks 08 and 09 derive from one
context (:meth:`TestTimeContext.variant`, which keeps device and precision), the BN-adapted streams
and the refiners over them run where they are told, and the cost study times where that says.
Here :func:`default_device` answers a device no machine has, and each path must hand it on; the
cells' input digests stay those of the contexts built by hand before, so committed rows stay current."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.studies import ablations, appendix_settings, sensitivity
from dartlib.experiments.cell_options import options_text
from dartlib.experiments.engine import TestTimeContext
from dartlib.experiments.settings import Settings
from dartlib.models.backbones import small_cnn
from dartlib.studies import costs as cost_study

SENTINEL = "sentinel:7"  # a device no machine has: only default_device() can have named it


@pytest.fixture()
def sentinel(monkeypatch) -> str:
    """:func:`dartlib.devices.default_device`, and every alias of it a dartlib module imported,
    answering :data:`SENTINEL`."""
    import dartlib.devices

    original = dartlib.devices.default_device
    for name, module in list(sys.modules.items()):
        if (name == "dartlib" or name.startswith("dartlib.")) and getattr(module, "default_device", None) is original:
            monkeypatch.setattr(module, "default_device", lambda: SENTINEL)
    return SENTINEL


def _refiner(alpha: float = 0.1) -> Refiner:
    torch.manual_seed(0)
    return Refiner(module=RefinementModule(10, hidden=8), config=DartConfig(alpha=alpha))


def _settings() -> Settings:
    return Settings.from_profile("cpu", corrupted_dataset="fmnistc", memo_corruptions=["gaussian_noise"],
                                 tent_corruptions=["gaussian_noise"], sensitivity_corruptions=["gaussian_noise"],
                                 condensed_corruptions=["gaussian_noise"], lt_rhos=[10], alpha_values=[0.1, 1.0],
                                 test_batches=[16, 64], hyper_int_batches=[64], hyper_hidden=[100],
                                 epochs_grid=[5], epochs_imb_irs=[50])


def test_a_context_made_without_a_device_is_on_the_machines_device(sentinel):
    context = TestTimeContext(source=small_cnn(10, width=4).eval(), refiner=None)
    assert context.device == sentinel
    assert TestTimeContext(source=context.source, refiner=None, device="cpu").device == "cpu"


def test_a_variant_keeps_device_and_precision_and_copies_its_dictionaries():
    base = TestTimeContext(source=small_cnn(10, width=4).eval(), refiner=_refiner(), device=SENTINEL,
                           precision="bf16", options={"tent": {"lr": 1e-3}})
    other = base.variant(refiner=None, batch_size=16)
    assert (other.device, other.precision, other.batch_size, other.refiner) == (SENTINEL, "bf16", 16, None)
    assert other.source is base.source and other.options == base.options and other.options is not base.options
    assert other._shared is None and other._resident == {}
    with pytest.raises(ValueError, match="keeps its context's device"):
        base.variant(device="cpu")
    with pytest.raises(TypeError, match="no field batch; valid: .*batch_size"):
        base.variant(batch=16)


def test_variants_of_one_source_share_its_memo_and_others_do_not():
    base = TestTimeContext(source=small_cnn(10, width=4).eval(), refiner=_refiner(), device="cpu")
    same, other = base.variant(refiner=None), base.variant(source=small_cnn(10, width=4).eval())
    assert same.shared_source() is base.shared_source() is same.variant(batch_size=16).shared_source()
    assert other.shared_source() is not base.shared_source()


def _former(source, refiner, *, batch_size: int, options: dict | None = None) -> TestTimeContext:
    """A context as notebooks 08 and 09 built theirs by hand before (on the CPU)."""
    return TestTimeContext(source=source, refiner=refiner, batch_size=batch_size, device="cpu", options=options or {})


def test_notebook_09_memo_contexts_derive_from_the_table1_context(sentinel, tiny_corrupted, monkeypatch):
    """MEMO's two contexts take the device of the context they derive from (the machine's), and
    every cell's input digest is the one the hand-built contexts gave."""
    s = _settings()
    source, refiner = small_cnn(10, width=4).eval(), _refiner()
    # as prepare_context(method_inputs=False) makes it, with no device named
    base = TestTimeContext(source=source, refiner=refiner, batch_size=s.test.batch_size,
                           options={"memo": {"n_augmentations": s.methods.memo_augmentations}})
    seen = {}
    monkeypatch.setattr(appendix_settings, "_run", lambda settings, cells, context_of, **_: seen.update(
        cells=cells, context_of=context_of))
    appendix_settings.run_memo(settings=s, context=base)
    memo_cells = [c for c in seen["cells"] if c.method == "memo"]
    assert memo_cells and all(seen["context_of"](c).device == sentinel for c in seen["cells"])
    for cell in memo_cells:
        mode = {"stored": "source", "adapted": "batch"}[cell.options["bn"]]
        former = _former(source, refiner, batch_size=s.test.batch_size,
                         options={"memo": {"bn": mode, "n_augmentations": s.methods.memo_augmentations}})
        assert seen["context_of"](cell).inputs(cell) == former.inputs(cell)


def test_notebook_09_condensed_refiners_train_and_run_on_the_contexts_device(sentinel, tmp_path, monkeypatch):
    from dartlib.data.dataset import CIFAR10_CLASSES, Dataset

    s = _settings()
    context = TestTimeContext(source=small_cnn(10, width=4).eval(), refiner=_refiner())
    assert context.device == sentinel
    devices = {}
    train = Dataset("toy", "train", np.zeros((100, 32, 32, 3), np.uint8), np.repeat(np.arange(10), 10), CIFAR10_CLASSES)
    s = s.replace(condensed_ipc=5)

    def recorded(what, result):
        def call(*args, device=None, **kwargs):
            devices[what] = device
            return result() if callable(result) else result
        return call

    monkeypatch.setattr(appendix_settings, "train_source", recorded("train_source", None))
    monkeypatch.setattr(appendix_settings, "load", lambda *args, **kwargs: train)
    monkeypatch.setattr(appendix_settings, "SOURCES", {})  # no condensed set: only the random subset's g_phi
    monkeypatch.setattr(appendix_settings, "load_or_train_refiner", recorded("refiner", lambda: (_refiner(), {})))
    monkeypatch.setattr(appendix_settings, "run_cells", lambda cells, context, **kw: devices.update(
        cells=context.device, refiners={c.refiner for c in cells} - set(context.refiners)))
    monkeypatch.setattr(appendix_settings, "results_dir", lambda profile: tmp_path)
    appendix_settings.run_condensed(settings=s, context=context)
    assert devices == {"train_source": sentinel, "refiner": sentinel, "cells": sentinel, "refiners": {"none", "dart"}}


def test_notebook_08_contexts_and_refiners_are_on_the_machines_device(sentinel, tiny_corrupted, tmp_path,
                                                                              monkeypatch):
    """train_sensitivity_inputs trains g_phi on the machine's device, prepare_sensitivity loads them and
    makes the context there; every table's
    cells (BNAdapt's and TENT's alpha cells, the epochs cells on CIFAR-10C-imb, the test-batch cells)
    run on contexts derived from it, with the input digests the hand-built ones gave."""
    s = _settings()
    source = small_cnn(10, width=4).eval()
    calls = []

    def refiners(checkpoint, model, train, configs, *, device=None, **_):
        calls.append(("trained", device))

    def loaded(checkpoint, configs, **_):
        calls.append(("loaded", checkpoint))
        return [(_refiner(c.alpha), {}) for c in configs]

    monkeypatch.setattr(sensitivity, "load_or_train_refiners", refiners)
    monkeypatch.setattr(sensitivity, "load_refiners", loaded)
    monkeypatch.setattr(sensitivity, "results_dir", lambda profile: tmp_path)
    grids = []
    def inputs_of(context):
        return context.inputs if isinstance(context, TestTimeContext) else lambda c: context(c).inputs(c)

    monkeypatch.setattr(sensitivity, "run_cells", lambda cells, context, **kw: grids.append((cells, inputs_of(context)))
                        or pd.DataFrame({"refiner": [c.refiner for c in cells], "params": [c.params for c in cells],
                                         "experiment": "", "corruption": "", "shift": "", "shift_param": 0.0,
                                         "method": [c.method for c in cells]}))
    setup = SimpleNamespace(model=source, checkpoint=tmp_path / "source.pt", train=None)
    monkeypatch.setattr("dartlib.experiments.training_stage.train_source_inputs", lambda **_: setup)
    sensitivity.train_sensitivity_inputs(settings=s)
    study = sensitivity.prepare_sensitivity(settings=s, setup=setup)
    assert study.context.device == sentinel
    sensitivity.run_alpha(study)
    sensitivity.run_epochs_imb(study)
    sensitivity.run_test_batches(study)
    assert calls == [("trained", sentinel), ("loaded", setup.checkpoint)], calls
    (bn_cells, bn_inputs), (alpha_cells, alpha_inputs), (imb_cells, imb_inputs), (batch_cells, batch_inputs) = grids
    batch = s.test.batch_size
    for cells, inputs, prefix in ((bn_cells, bn_inputs, "alpha"), (alpha_cells, alpha_inputs, "alpha"),
                                  (imb_cells, imb_inputs, "epochs")):
        assert {c.refiner for c in cells} == {"none", "dart"}
        for cell in cells:
            value = cell.options.get(prefix)
            refiner = None if cell.refiner == "none" else study.refiners[options_text(**{prefix: value})]
            assert inputs(cell) == _former(source, refiner, batch_size=batch).inputs(cell)
    for cell in batch_cells:
        assert batch_inputs(cell) == _former(source, study.refiners["base"], batch_size=batch).inputs(cell)


class _Recorder:
    """Stands for a model or a refiner: records where it is moved."""

    def __init__(self) -> None:
        self.moved_to: list[str] = []

    def to(self, device):
        self.moved_to.append(device)
        return self

    def reset(self) -> None:
        pass


def test_bn_adapted_streams_default_to_the_machines_device(sentinel, monkeypatch):
    frozen = _Recorder()
    monkeypatch.setattr(ablations, "frozen_bn_adapted", lambda model: frozen)
    assert ablations.bnadapt_streams(torch.nn.Identity(), dataset="fmnistc", corruptions=[], shifts={}) == []
    assert frozen.moved_to == [sentinel]


def test_the_cost_study_times_on_the_machines_device(sentinel, monkeypatch):
    s = _settings()
    labels = np.repeat(np.arange(10), 4)
    loaded = []
    monkeypatch.setattr(cost_study, "prepare_source", lambda settings: SimpleNamespace(
        model=None, checkpoint=None, train=None))
    monkeypatch.setattr(cost_study, "load_refiners", lambda checkpoint, configs, **kw: loaded.append(configs) or [(None, {})])
    monkeypatch.setattr(cost_study, "load", lambda *a, **kw: SimpleNamespace(labels=labels, images=np.zeros((40, 1))))
    study = cost_study.prepare_costs(s)
    assert study.device == sentinel and loaded == [[s.dart_config()]]  # notebook 04's g_phi, loaded
    assert study.device_name.startswith("CPU")  # not a GPU's name: the device is not one
