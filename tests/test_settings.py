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
    assert refiner_path(checkpoint, s.dart_config(variant="dart-split")).is_file()


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
