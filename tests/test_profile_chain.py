"""Profiles are one chain of differences (the settings tree's defaults <- smoke <- cpu <- gpu <- paper-c10
/ paper): each extends the one before it and writes only the values that differ from it, so a value is
stated once."""

from __future__ import annotations

import yaml

from dartlib.paths import NOTEBOOKS_DIR
from dartlib.profiles import load_profile, profile_names

CHAIN = {"cpu": "smoke", "gpu": "cpu", "paper": "gpu", "paper-c10": "gpu"}


def test_every_profile_extends_the_one_before_it_and_restates_nothing():
    assert set(profile_names()) == {"smoke", *CHAIN}
    for name, base in CHAIN.items():
        written = yaml.safe_load((NOTEBOOKS_DIR / "profiles" / f"{name}.yaml").read_text())
        assert written.pop("extends") == base, name
        inherited = load_profile(base)
        same = sorted(k for k, v in written.items() if k != "profile" and k in inherited and inherited[k] == v)
        assert not same, f"notebooks/profiles/{name}.yaml restates {same} of {base}.yaml: delete those lines"


def test_the_root_profile_restates_no_default_of_the_settings_tree():
    from dartlib.settings_tree import default_values

    written = yaml.safe_load((NOTEBOOKS_DIR / "profiles" / "smoke.yaml").read_text())
    assert "extends" not in written
    defaults = default_values()
    same = sorted(k for k, v in written.items() if k != "profile" and defaults.get(k) == v)
    assert not same, f"notebooks/profiles/smoke.yaml restates {same}, the defaults of dartlib/settings_tree.py"
    assert load_profile("smoke") == {**defaults, "profile": "smoke"}
