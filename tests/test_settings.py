"""One source of settings (dartlib.experiments.settings): the typed tree, and its g_phi settings become a DartConfig in one place."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dartlib.dart.intermediate import refiner_path
from dartlib.dart.refiner import DartConfig
from dartlib.experiments.settings import Settings
from dartlib.models.artefacts import COMMITTED_DIR
from dartlib.models.checkpoints import checkpoint_path


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_a_profiles_dart_config_names_its_committed_refiner(profile):
    s = Settings.from_profile(profile)
    checkpoint = checkpoint_path(dataset=s.source.dataset, arch=s.source.arch, recipe=s.source.recipe,
                                 seed=s.seed, directory=COMMITTED_DIR)
    assert refiner_path(checkpoint, s.dart_config()).is_file()
    # DART-split serves notebook 11, which a profile may still hold at the former shortcut
    split = s.for_study("online_imbalance").dart_config(variant="dart-split")
    assert refiner_path(checkpoint, split).is_file()


def test_a_study_held_at_the_shortcut_runs_it_and_says_so_and_the_others_run_the_profiles_own(capsys):
    from dartlib.experiments.settings import SHORTCUT, SHORTCUT_STUDIES

    s = Settings.from_profile("cpu").replace(shortcut_studies=["online_imbalance"])
    held = s.for_study("online_imbalance")
    assert (held.dart.epochs, held.dart.alpha, held.methods.note_finetune_epochs) == (10, 30.0, 1) == tuple(SHORTCUT.values())
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


def test_dart_config_reads_the_section_and_the_seed():
    s = Settings.from_profile("smoke")
    assert s.dart_config() == DartConfig(alpha=s.dart.alpha, delta=s.dart.delta, n_dir=s.dart.n_dir, batch_size=s.dart.batch_size,
                                         hidden=s.dart.hidden, epochs=s.dart.epochs, per_class=s.dart.per_class, seed=s.seed)
    assert Settings.from_profile("smoke", dart_per_class=0).dart_config().per_class is None  # 0: every training image
    assert Settings.from_profile("smoke", dart_alpha=30, seed=2).dart_config(epochs=10) == replace(
        s.dart_config(), alpha=30.0, seed=2, epochs=10)


def test_unknown_overrides_and_keys_name_the_valid_ones():
    with pytest.raises(TypeError, match="valid: variant, alpha"):
        Settings.from_profile("smoke").dart_config(alfa=1.0)
    with pytest.raises(KeyError, match="unknown setting 'dart_alfa'; valid names: .*dart_alpha"):
        Settings.from_profile("smoke", dart_alfa=1.0)
    with pytest.raises(KeyError, match="unknown setting 'dart_alfa'"):
        Settings.from_profile("smoke").replace(dart_alfa=1.0)
    with pytest.raises(AttributeError, match="alfa"):
        Settings.from_profile("smoke").dart.alfa


def test_overrides_win_over_the_profile():
    assert Settings.from_profile("cpu", dart_alpha=1.0).dart_config(epochs=2) == replace(
        Settings.from_profile("cpu").dart_config(), alpha=1.0, epochs=2)


# modules that speak the flat keys by design: the tree itself, the profile files and their checks, the
# runner (papermill's parameters) and what a page records, and Settings' own construction
FLAT_KEY_MODULES = {"settings_tree.py", "profiles.py", "schema.py", "runner.py", "provenance.py",
                    "experiments/settings.py"}
_RECEIVERS = r"(?:\w*settings?|s|p|params|values|profile|smoke|cpu)"


def flat_reads(text: str) -> list[str]:
    """Each read of a setting by its flat name as a string (``settings["dart_alpha"]``,
    ``params.get("seed")``) in ``text``."""
    import re

    from dartlib.settings_tree import SETTINGS

    keys = "|".join(sorted(SETTINGS, key=len, reverse=True))
    found = re.finditer(rf"\b{_RECEIVERS}(?:\[|\.get\()[\"']({keys})[\"']", text)
    return [m.group(0) for m in found]


def test_code_reads_the_settings_tree_never_a_flat_name():
    import json

    from dartlib.paths import NOTEBOOKS_DIR, REPO_ROOT

    package = REPO_ROOT / "dartlib"
    found = {str(p.relative_to(package)): flat_reads(p.read_text()) for p in package.rglob("*.py")
             if p.relative_to(package).as_posix() not in FLAT_KEY_MODULES}
    for path in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        found[path.name] = flat_reads("\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code"))
    assert {k: v for k, v in found.items() if v} == {}


def test_a_planted_flat_read_is_found():
    assert flat_reads('x = settings["dart_alpha"] + s.get("seed", 0)\nrow["seed"]') == ['settings["dart_alpha"', 's.get("seed"']
    assert flat_reads("x = settings.dart.alpha") == []
