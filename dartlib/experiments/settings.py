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

    def checkpoint(self):
        """The path of the profile's source checkpoint (:func:`dartlib.models.checkpoints.checkpoint_path`)."""
        from dartlib.models.checkpoints import checkpoint_path

        return checkpoint_path(dataset=self["source_dataset"], arch=self["source_arch"],
                               recipe=self["source_recipe"], seed=self["seed"])

    def dart_config(self, **overrides: Any) -> DartConfig:
        """:func:`dart_config` of this profile."""
        return dart_config(self.values, **overrides)
