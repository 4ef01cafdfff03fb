"""One source of settings: a profile's values as the typed settings tree (:mod:`dartlib.settings_tree`),
and the one place where they become a :class:`dartlib.dart.refiner.DartConfig`.

Notebooks, the CLI and the grids read g_phi's settings through :meth:`Settings.dart_config`; DART's
own defaults stay in :class:`DartConfig`, the settings' defaults in the tree, a profile's
differences in ``notebooks/profiles/<name>.yaml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dartlib.dart.refiner import DartConfig
from dartlib.profiles import load_profile
from dartlib.settings_tree import OVERRIDES, SETTINGS, SettingsTree, flat_values

# The cpu profile's g_phi before the paper's (50 epochs at alpha 0.1, NOTE's IABN 30 epochs) became its own:
# 10 epochs at alpha 30, NOTE's IABN 1 epoch. Kept as a named variant: its rows stay, labelled, and a study
# a profile lists in ``shortcut_studies`` still runs it until its rows at the profile's own g_phi are computed.
SHORTCUT: dict[str, Any] = {"dart_epochs": 10, "dart_alpha": 30.0, "note_finetune_epochs": 1}
# The cpu profile's refiners of notebooks 07 and 08 before the paper's (50 epochs at alpha 0.1) became their
# own: every variant 2 epochs at alpha 10, the epochs table up to 10 epochs.
ABLATION_SHORTCUT: dict[str, Any] = {"ablation_epochs": 2, "ablation_alpha": 10.0, "epochs_grid": [1, 2, 5, 10]}
# The studies that can be held at a shortcut (``shortcut_studies``): each one's name as its results file,
# grid or keyed table names it, with the notebook that shows it and the shortcut it is held at.
SHORTCUT_STUDIES: dict[str, str] = {
    "more_settings": "09", "all_corruptions": "09", "costs": "10", "online_imbalance": "11",
    "ablations": "07", "sensitivity": "08",
}
_HELD_AT: dict[str, dict[str, Any]] = {"ablations": ABLATION_SHORTCUT, "sensitivity": ABLATION_SHORTCUT}
# A grid that extends a study's table to more streams runs with that study's settings, held where it is held.
_GRID_STUDY: dict[str, str] = {"sensitivity_all_corruptions": "sensitivity"}


def study_of(grid: str) -> str | None:
    """The study whose hold at the shortcut (``shortcut_studies``) grid ``grid`` follows, or None."""
    study = _GRID_STUDY.get(grid, grid)
    return study if study in SHORTCUT_STUDIES else None


def shortcut_of(study: str) -> dict[str, Any]:
    """The shortcut ``study`` is held at where a profile lists it in ``shortcut_studies``."""
    return _HELD_AT.get(study, SHORTCUT)


def refiner_words(values: Mapping[str, Any]) -> str:
    """g_phi's epochs and alpha (and NOTE's IABN epochs where set) of ``values``, in words: the main
    refiner's keys, or the ablation refiners' (``ablation_epochs``, ``ablation_alpha``)."""
    if "dart_epochs" not in values and "ablation_epochs" in values:
        return (f"every ablation refiner g_phi {values['ablation_epochs']} epochs at alpha "
                f"{float(values['ablation_alpha']):g}")
    text = f"g_phi {values.get('dart_epochs')} epochs at alpha {float(values.get('dart_alpha')):g}"
    return text + (f", NOTE's IABN {values['note_finetune_epochs']} epoch(s)" if "note_finetune_epochs" in values else "")


PLAIN = (str, int, float, bool, list, dict, type(None))  # the value kinds of a profile's YAML


@dataclass(frozen=True)
class Settings(SettingsTree):
    """A profile's settings as the typed tree (:class:`dartlib.settings_tree.SettingsTree`: read
    ``settings.dart.alpha``), with g_phi's configuration (:meth:`dart_config`) and the source
    checkpoint (:meth:`checkpoint`) they name."""

    @classmethod
    def from_profile(cls, name: str, **overrides: Any) -> Settings:
        """``notebooks/profiles/<name>.yaml``, with ``overrides`` (flat keys) on top."""
        return cls.from_params({**load_profile(name), **_known(overrides)})

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Settings:
        """A notebook's or a profile's parameters (must name their ``profile``), on top of that
        profile's values. A notebook may pass its namespace (``globals()``): only the tree's keys
        holding plain values (the kinds a profile YAML holds) are kept, not modules, functions, the
        kernel's own entries or the notebook's other variables."""
        if "profile" not in params:
            raise KeyError("settings need a `profile` key (the profile's name)")
        given = {k: v for k, v in params.items() if k in SETTINGS and isinstance(v, PLAIN)}
        given.update(_known(params.get(OVERRIDES) or {}))
        return cls._of({**load_profile(str(given["profile"])), **given})

    @classmethod
    def _of(cls, values: Mapping[str, Any]) -> Settings:
        tree = SettingsTree.from_values(values)
        return cls(**{f.name: vars(tree)[f.name] for f in dataclasses.fields(SettingsTree)})  # not a read

    def replace(self, **values: Any) -> Settings:
        """These settings with ``values`` (profile keys) on top, e.g. another ``source_arch``."""
        return Settings._of({**flat_values(self), **_known(values)})

    def for_study(self, study: str) -> Settings:
        """The settings ``study`` runs with: its shortcut (:func:`shortcut_of`) on top where the profile lists it in
        ``shortcut_studies`` (its rows at the profile's own g_phi are not computed yet), else these."""
        if study not in SHORTCUT_STUDIES:
            from dartlib.registry import unknown_name_message

            raise KeyError(unknown_name_message("study that can be held at the shortcut", study, SHORTCUT_STUDIES))
        return self.replace(**shortcut_of(study)) if study in self.run.shortcut_studies else self

    def held_at_shortcut(self, study: str) -> str:
        """One line for ``study``'s page where the profile holds it at :data:`SHORTCUT`, else ""."""
        if self.for_study(study) is self:
            return ""
        return (f"{study}: these rows use the former shortcut ({refiner_words(shortcut_of(study))}), not the {self.profile} "
                f"profile's own g_phi: its rows with that one are not computed yet "
                f"(notebooks/profiles/{self.profile}.yaml, shortcut_studies)")

    def say_if_held(self, study: str) -> None:
        """Print :meth:`held_at_shortcut`'s line for a page where ``study`` is held at the shortcut."""
        line = self.held_at_shortcut(study)
        if line:
            print(line)

    def checkpoint(self):
        """The path of the profile's source checkpoint (:func:`dartlib.models.checkpoints.checkpoint_path`)."""
        from dartlib.models.checkpoints import checkpoint_path

        return checkpoint_path(dataset=self.source.dataset, arch=self.source.arch, recipe=self.source.recipe,
                               seed=self.seed)

    def training_command(self, *grids: str) -> str:
        """The training stage's command that makes this profile's trained inputs (and those of ``grids``)."""
        return f"python -m dartlib train --profile {self.profile}" + (f" --grids {','.join(grids)}" if grids else "")

    def dart_config(self, **overrides: Any) -> DartConfig:
        """g_phi's configuration (:class:`DartConfig`) of these settings: the section :class:`Dart` (Appendix A)
        and the seed, then ``overrides`` (DartConfig field names, e.g. ``variant="dart-split"``, ``epochs=2``).
        ``per_class`` 0 means every training image (None in DartConfig)."""
        fields = [f.name for f in dataclasses.fields(DartConfig)]
        unknown = set(overrides) - set(fields)
        if unknown:
            raise TypeError(f"unknown DartConfig fields {sorted(unknown)}; valid: " + ", ".join(fields))
        d = self.dart
        values = dict(alpha=float(d.alpha), delta=float(d.delta), n_dir=int(d.n_dir), batch_size=int(d.batch_size),
                      hidden=int(d.hidden), epochs=int(d.epochs), per_class=int(d.per_class) or None, seed=int(self.seed))
        return DartConfig(**{**values, **overrides})


def _known(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """``values`` if each key is a setting of the tree, else KeyError naming the valid ones."""
    from dartlib.registry import unknown_name_message

    for key in values:
        if key not in SETTINGS:
            raise KeyError(unknown_name_message("setting", key, SETTINGS))
    return values

