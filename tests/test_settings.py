"""One source of settings (dartlib.experiments.settings): profile keys become a DartConfig in one place."""

from __future__ import annotations

import pytest

from dartlib.dart.intermediate import refiner_path
from dartlib.dart.refiner import DartConfig
from dartlib.experiments.settings import Settings, dart_config
from dartlib.models.artefacts import COMMITTED_DIR
from dartlib.models.checkpoints import checkpoint_path


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_a_profiles_dart_config_names_its_committed_refiner(profile):
    s = Settings.from_profile(profile)
    checkpoint = checkpoint_path(dataset=s["source_dataset"], arch=s["source_arch"], recipe=s["source_recipe"],
                                 seed=s["seed"], directory=COMMITTED_DIR)
    assert refiner_path(checkpoint, s.dart_config()).is_file()
    # DART-split serves notebook 11, which a profile may still hold at the former shortcut
    split = s.for_study("online_imbalance").dart_config(variant="dart-split")
    assert refiner_path(checkpoint, split).is_file()


def test_a_study_held_at_the_shortcut_runs_it_and_says_so_and_the_others_run_the_profiles_own(capsys):
    from dartlib.experiments.settings import SHORTCUT, SHORTCUT_STUDIES

    s = Settings.from_profile("cpu").replace(shortcut_studies=["online_imbalance"])
    held = s.for_study("online_imbalance")
    assert (held["dart_epochs"], held["dart_alpha"], held["note_finetune_epochs"]) == (10, 30.0, 1) == tuple(SHORTCUT.values())
    assert held.dart_config() != s.dart_config() and s.dart_config().epochs == 50 and s.dart_config().alpha == 0.1
    assert s.for_study("costs") is s
    s.say_if_held("online_imbalance")
    s.say_if_held("costs")
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1 and "g_phi 10 epochs at alpha 30" in said[0] and "not the cpu profile's own g_phi" in said[0]
    held.say_if_held("online_imbalance")  # as a page does, on the settings it runs with
    assert capsys.readouterr().out.splitlines() == said
    with pytest.raises(KeyError, match="valid names: " + ", ".join(SHORTCUT_STUDIES)):
        s.for_study("table1")


def test_the_studies_pinned_to_the_shortcut_by_design_state_it_once():
    from dartlib.experiments.settings import SHORTCUT
    from dartlib.studies.backbone_strength import STUDIED_REFINER
    from dartlib.studies.diagnosis import DIAGNOSED

    assert DIAGNOSED == {"epochs": SHORTCUT["dart_epochs"], "alpha": SHORTCUT["dart_alpha"]}
    assert STUDIED_REFINER == {"dart_epochs": SHORTCUT["dart_epochs"], "dart_alpha": SHORTCUT["dart_alpha"]}


def test_absent_or_none_keys_keep_dartconfigs_defaults():
    assert dart_config({}) == DartConfig()
    assert dart_config({"dart_alpha": None, "dart_per_class": 0}) == DartConfig(per_class=None)
    assert dart_config({"dart_alpha": 30, "dart_epochs": 10.0}) == DartConfig(alpha=30.0, epochs=10)


def test_unknown_overrides_and_keys_name_the_valid_ones():
    with pytest.raises(TypeError, match="valid: variant, alpha"):
        dart_config({}, alfa=1.0)
    with pytest.raises(KeyError, match="has no 'dart_alfa'; it has: .*dart_alpha"):
        Settings.from_profile("smoke")["dart_alfa"]


def test_overrides_win_over_the_profile():
    assert Settings.from_profile("cpu", dart_alpha=0.1).dart_config(epochs=2) == dart_config(
        {**Settings.from_profile("cpu").values, "dart_alpha": 0.1}, epochs=2)
