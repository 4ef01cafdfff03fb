"""One source of settings: a profile's values as a typed object, and the one place where profile
keys become a :class:`dartlib.dart.refiner.DartConfig`.

Notebooks, the CLI and the grids read g_phi's settings through :meth:`Settings.dart_config`;
DART's own defaults stay in :class:`DartConfig`, profile values in
``notebooks/profiles/<name>.yaml``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dartlib.dart.refiner import DartConfig
from dartlib.profiles import load_profile

# profile key -> DartConfig field (the intermediate settings of Appendix A and g_phi's own)
DART_KEYS: dict[str, str] = {
    "dart_alpha": "alpha", "dir_delta": "delta", "dart_n_dir": "n_dir", "int_batch_size": "batch_size",
    "dart_hidden": "hidden", "dart_epochs": "epochs", "dart_per_class": "per_class", "seed": "seed",
}


def dart_config(params: Mapping[str, Any], **overrides: Any) -> DartConfig:
    """The g_phi settings of a profile's (or a notebook's) parameters: the keys of
    :data:`DART_KEYS` that ``params`` holds, then ``overrides`` (DartConfig field names, e.g.
    ``variant="dart-split"``, ``epochs=2``). ``dart_per_class`` 0 means every training image; a key
    absent or None keeps DartConfig's default (the paper's CIFAR-10 value, stated there once)."""
    values = {name: params[key] for key, name in DART_KEYS.items() if params.get(key) is not None}
    if "per_class" in values:
        values["per_class"] = int(values["per_class"]) or None
    for name in ("n_dir", "batch_size", "hidden", "epochs", "seed"):
        if name in values:
            values[name] = int(values[name])
    for name in ("alpha", "delta"):
        if name in values:
            values[name] = float(values[name])
    unknown = set(overrides) - {f.name for f in dataclasses.fields(DartConfig)}
    if unknown:
        raise TypeError(f"unknown DartConfig fields {sorted(unknown)}; valid: "
                        + ", ".join(f.name for f in dataclasses.fields(DartConfig)))
    return DartConfig(**{**values, **overrides})


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
class Settings:
    """A profile's parameters (``values``), with typed views of the groups the library uses."""

    profile: str
    values: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_profile(cls, name: str, **overrides: Any) -> Settings:
        """``notebooks/profiles/<name>.yaml``, with ``overrides`` (profile keys) on top."""
        return cls.from_params({**load_profile(name), **overrides})

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Settings:
        """A notebook's or a profile's parameters (must name their ``profile``). A notebook may pass
        its namespace (``globals()``): only public names holding plain values (the kinds a profile
        YAML holds) are kept, not modules, functions or the kernel's own entries."""
        if "profile" not in params:
            raise KeyError("settings need a `profile` key (the profile's name)")
        values = {k: v for k, v in params.items() if not k.startswith("_") and isinstance(v, PLAIN)}
        return cls(profile=str(params["profile"]), values=values)

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise KeyError(f"profile {self.profile!r} has no {key!r}; it has: {', '.join(sorted(self.values))}")
        return self.values[key]

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def replace(self, **values: Any) -> Settings:
        """These settings with ``values`` (profile keys) on top, e.g. another ``source_arch``."""
        return Settings.from_params({**self.values, **values})

    def for_study(self, study: str) -> Settings:
        """The settings ``study`` runs with: its shortcut (:func:`shortcut_of`) on top where the profile lists it in
        ``shortcut_studies`` (its rows at the profile's own g_phi are not computed yet), else these."""
        if study not in SHORTCUT_STUDIES:
            from dartlib.registry import unknown_name_message

            raise KeyError(unknown_name_message("study that can be held at the shortcut", study, SHORTCUT_STUDIES))
        return self.replace(**shortcut_of(study)) if study in (self.get("shortcut_studies") or []) else self

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

        return checkpoint_path(dataset=self["source_dataset"], arch=self["source_arch"],
                               recipe=self["source_recipe"], seed=self["seed"])

    def dart_config(self, **overrides: Any) -> DartConfig:
        """:func:`dart_config` of this profile."""
        return dart_config(self.values, **overrides)
