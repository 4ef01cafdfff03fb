"""The training stage makes what preparing a context only loads (ARCHITECTURE.md): on the committed
smoke inputs it trains nothing, and the commands run it before they prepare."""

from __future__ import annotations

import dataclasses

import pytest

from dartlib.experiments.settings import Settings


def _forbidden(*args, **kwargs):
    raise AssertionError("the committed inputs are there: nothing may train")


def test_the_stage_finds_the_committed_smoke_inputs_and_trains_nothing(monkeypatch):
    from dartlib.experiments import training_stage

    generated = []
    monkeypatch.setattr(training_stage, "ensure_corrupted", lambda name, *, severities: generated.append((name, severities)))
    monkeypatch.setattr("dartlib.models.training.build", _forbidden)  # a source model being trained
    monkeypatch.setattr("dartlib.dart.intermediate._train_pass", _forbidden)  # a refiner
    monkeypatch.setattr("dartlib.tta.note.finetune_iabn", _forbidden)  # NOTE's IABN copy
    settings = Settings.from_profile("smoke")
    source = training_stage.train_profile_inputs(settings=settings, device="cpu")
    assert source.checkpoint == settings.checkpoint() and source.train.num_classes == 10
    assert generated == [("fmnistc", [settings.test.severity])]


def test_the_stage_trains_what_is_absent_and_preparing_loads_it(monkeypatch, tmp_path):
    """In a data root holding only the smoke source model, prepare_context names the stage's command
    and trains nothing; the stage trains the absent refiner (on the device given, one pass), and
    prepare_context then loads it."""
    import shutil

    from dartlib.dart import intermediate
    from dartlib.experiments import engine, training_stage
    from dartlib.models.checkpoints import load_weights

    settings = Settings.from_profile("smoke")
    committed_source, committed = settings.checkpoint(), intermediate.refiner_path(settings.checkpoint(), settings.dart_config())
    trained_blob = load_weights(committed)  # what the fake pass "trains": the committed refiner's weights
    monkeypatch.setenv("DART_DATA_DIR", str(tmp_path))
    (tmp_path / "checkpoints").mkdir()
    shutil.copy(committed_source, settings.checkpoint())
    monkeypatch.setattr(training_stage, "ensure_corrupted", lambda name, *, severities: None)
    with pytest.raises(FileNotFoundError, match="`python -m dartlib train --profile smoke` trains them"):
        engine.prepare_context(settings=settings, method_inputs=False, device="cpu")
    trained = []

    def train_pass(model, train, configs, *, device, **_):
        trained.append((len(configs), device))
        return [(intermediate._from_blob(trained_blob), trained_blob["log"])], 0.0

    monkeypatch.setattr(intermediate, "_train_pass", train_pass)
    training_stage.train_profile_inputs(settings=settings, method_inputs=False, device="cpu")
    assert trained == [(1, "cpu")] and intermediate.refiner_path(settings.checkpoint(), settings.dart_config()).is_file()
    context, _ = engine.prepare_context(settings=settings, method_inputs=False, device="cpu")
    assert context.refiner.config == settings.dart_config()


def test_the_grid_command_runs_its_training_stage_before_preparing_and_status_does_not(monkeypatch, tmp_path):
    from dartlib.cli import main
    from dartlib.studies import grids

    order = []

    def prepare(**kwargs):
        order.append("prepare")
        raise KeyboardInterrupt  # stops the command once the order is known

    def train(**kwargs):
        order.append("train")

    monkeypatch.setitem(grids.GRIDS._items, "table1", dataclasses.replace(grids.GRIDS["table1"], train=train,
                                                                           prepare=prepare))
    monkeypatch.setattr("dartlib.cli.grid.writable", lambda *folders: None)
    for argv, expected in ((["grid", "table1", "--profile", "smoke"], ["train", "prepare"]),
                           (["grid", "table1", "--profile", "smoke", "--status"], ["prepare"])):
        order.clear()
        assert main(argv) == 130 and order == expected, argv  # 130: the command's answer to an interruption


def test_train_names_the_valid_grids_before_anything_trains(capsys, monkeypatch):
    from dartlib.cli import main

    monkeypatch.setattr("dartlib.models.training.train_source", _forbidden)
    assert main(["train", "--profile", "smoke", "--grids", "tabel1"]) == 2
    err = capsys.readouterr().err
    assert "unknown grid tabel1; valid: table1, note_report" in err and "or all" in err
