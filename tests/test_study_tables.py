"""The studies' analysis tables (the figures of notebooks 02-05) are keyed by what made them: a
notebook run again over current tables computes nothing, and a changed model, test set or setting
recomputes them (dartlib.experiments.keyed_tables.study_inputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dartlib.experiments.keyed_tables import stamp_path, study_inputs
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import SourceSetup
from dartlib.models.backbones import frozen_bn_adapted
from dartlib.studies import prediction_deviation


def _setup(seed: int = 0) -> SourceSetup:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 10)).eval()
    return SourceSetup(checkpoint=None, model=model, meta={}, frozen=frozen_bn_adapted(model))


@pytest.fixture()
def settings(tiny_corrupted, tmp_path, monkeypatch):
    monkeypatch.setenv("DART_OUTPUT_DIR", str(tmp_path / "out"))
    monkeypatch.setenv("DART_OUTPUT_PROFILE", "smoke")
    return Settings.from_params({"profile": "smoke", "corrupted_dataset": "fmnistc", "severity": 5,
                                 "deviation_irs": [1, 5], "test_batch_size": 20, "seed": 0})


def test_study_inputs_change_with_the_model_the_test_set_and_each_setting(settings, tiny_corrupted):
    def digest(setup, values=(1,)):
        return study_inputs("s", revision=1, values=values, models=(setup.model,), sets=(("fmnistc", "gaussian_noise", 5),))

    first = digest(_setup())
    assert digest(_setup()) == first  # the same weights and images
    assert digest(_setup(seed=1)) != first  # other weights
    assert digest(_setup(), values=(2,)) != first  # another setting
    images = np.load(tiny_corrupted / "gaussian_noise.npy")
    images[-1, 0, 0, 0] ^= 1  # one bit of one image at severity 5
    np.save(tiny_corrupted / "gaussian_noise.npy", images)
    from dartlib.experiments import cell_streams
    cell_streams._set_digest_at.cache_clear()
    cell_streams._corrupted_at.cache_clear()
    assert digest(_setup()) != first


def test_figure4_points_are_computed_once_then_read(settings, monkeypatch):
    calls = []
    compute = prediction_deviation.deviation_over_irs

    def counted(*args, **kwargs):
        calls.append(1)
        return compute(*args, **kwargs)

    monkeypatch.setattr(prediction_deviation, "deviation_over_irs", counted)
    first = prediction_deviation.figure4_points(settings=settings, setup=_setup())
    again = prediction_deviation.figure4_points(settings=settings, setup=_setup())
    assert len(calls) == 1 and first.equals(again)
    assert sorted(first.ir.unique()) == [1, 5] and first.accuracy.between(0, 100).all()
    path = prediction_deviation.results_dir("smoke") / "prediction_deviation.csv"
    assert stamp_path(path).is_file()
    prediction_deviation.figure4_points(settings=settings.replace(deviation_irs=[1]), setup=_setup())
    assert len(calls) == 2  # a changed setting recomputes
    prediction_deviation.figure4_points(settings=settings.replace(deviation_irs=[1]), setup=_setup(seed=1))
    assert len(calls) == 3  # so does another model


def test_the_cost_table_is_measured_once_then_read_and_again_on_request(settings, monkeypatch):
    from dartlib.dart.refiner import DartConfig, Refiner
    from dartlib.studies import costs

    calls = []
    table = costs.cost_table

    def counted(*args, **kwargs):
        calls.append(1)
        return table(*args, **kwargs)

    monkeypatch.setattr(costs, "cost_table", counted)
    s = settings.replace(cost_corruption="gaussian_noise", cost_stream_limit=40, cost_repeats=1,
                         intermediate_steps_timed=1)
    from dartlib.dart.refiner import RefinementModule
    from dartlib.data import load

    refiner = Refiner(module=RefinementModule(10, hidden=8), config=DartConfig(hidden=8))
    images = load("fmnistc", corruption="gaussian_noise", severity=5).images[:40]
    study = costs.CostStudy(settings=s, device="cpu", device_name="CPU (test), 1 torch threads", setup=_setup(),
                            config=refiner.config, refiner=refiner, images=images)
    first = costs.measure_costs(study)
    assert len(calls) == 1 and set(first.machine) == {"CPU (test), 1 torch threads"}
    assert first.set_index(["method", "refiner"]).loc[("bnadapt", "none"), "wall_clock_vs_bnadapt"] == 1
    assert costs.measure_costs(study).equals(first) and len(calls) == 1  # current: read, not timed
    costs.measure_costs(study, remeasure=True)
    assert len(calls) == 2  # on request
    costs.measure_costs(costs.CostStudy(**{**study.__dict__, "settings": s.replace(cost_repeats=2)}))
    assert len(calls) == 3  # a changed setting
    costs.measure_costs(costs.CostStudy(**{**study.__dict__, "setup": _setup(seed=1)}))
    assert len(calls) == 4  # other weights

