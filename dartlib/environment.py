"""Every environment variable the suite reads, in one table, and the check ``python -m dartlib``
runs on all of them at start, before anything is computed or written.

A value that is set is checked even where it would not apply (``DART_PRECISION=fp8`` on a CPU
machine, where the precision is always fp32): a typo is refused when it is made, not on the day
the variable comes to matter. An unset or empty variable takes its default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

PRECISIONS = ("bf16", "fp32")
# The data folders a DART_<NAME>_DIR may move (dartlib.data.sources reads them with dartlib.data.dataset.location).
DATA_FOLDERS = ("FMNIST", "FMNISTC", "CIFAR10", "CIFAR10C", "CIFAR100", "CIFAR100C", "CIFAR101", "PACS", "OFFICEHOME",
                "DOMAINNET126", "IMAGENET", "IMAGENETC", "CONDENSED")


class EnvironmentSettingError(ValueError):
    """An environment variable of the suite set to a value it cannot take; the message is one
    line naming the variable, its value, what is valid and how to change it."""

    def __init__(self, name: str, value: str, valid: str) -> None:
        self.name, self.value = name, value
        super().__init__(f"{name}={value!r}: {valid}; set it to a valid value, or unset it (unset {name}) for "
                         f"its default")


def _digits(value: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes superscripts (``²``), which ``int`` refuses."""
    return value.isascii() and value.isdigit()


def _positive_int(value: str) -> str:
    return "" if _digits(value) and int(value) >= 1 else "expected a positive whole number (ASCII digits)"


def _one_of(*valid: str) -> Callable[[str], str]:
    return lambda value: "" if value in valid else f"valid: {', '.join(valid)}"


def _device(value: str) -> str:
    if value != "cpu" and not (value == "cuda" or (value.startswith("cuda:") and _digits(value[5:]))):
        return "valid: cpu, cuda, cuda:<index>"
    if value.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return "torch sees no GPU on this machine; valid here: cpu"
        if ":" in value and int(value[5:]) >= torch.cuda.device_count():
            return f"this machine has {torch.cuda.device_count()} GPU(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}"
    return ""


def _folder(value: str) -> str:
    path = Path(value).expanduser()
    return f"{path} exists and is not a folder; expected a folder" if path.exists() and not path.is_dir() else ""


def _file_in_folder(value: str) -> str:
    path = Path(value).expanduser()
    return f"{path} is a folder; expected a file path" if path.is_dir() else ""


# The profiles present, registered by dartlib.profiles where it is defined (this module sits below it:
# dartlib.paths reads its variables here); until then a profile name is checked for its form alone.
profile_names: Callable[[], list[str]] | None = None


def _profile(value: str) -> str:
    if profile_names is None:
        return "" if re.fullmatch(r"[A-Za-z0-9_-]+", value) else "not a profile name (letters, digits, - and _)"
    names = profile_names()
    return "" if value in names else f"not a profile; valid: {', '.join(names)}"


@dataclass(frozen=True)
class Variable:
    """One environment variable: what it does, and the check of a set value ("" when valid, else
    what is wrong and what is valid)."""

    name: str
    what: str
    check: Callable[[str], str]


VARIABLES: dict[str, Variable] = {v.name: v for v in [
    Variable("DART_DATA_DIR", "the data root (datasets, caches, trained models); default <repo>/data", _folder),
    Variable("DART_OUTPUT_DIR", "where one profile's results/, figures/ and runs/ go (set by `run --output`)", _folder),
    Variable("DART_OUTPUT_PROFILE", "the profile DART_OUTPUT_DIR is for (set by `run --output`)", _profile),
    Variable("DART_DEVICE", "where the heavy computations run: cpu, cuda or cuda:<index>; default the GPU if any",
             _device),
    Variable("DART_PRECISION", "the backbone's forward precision on a GPU: bf16 (default) or fp32", _one_of(*PRECISIONS)),
    Variable("DART_TF32", "0 turns TensorFloat-32 off on a GPU; 1 (default) leaves it on", _one_of("0", "1")),
    Variable("DART_WORKERS", "processes that generate corrupted test sets; default 1", _positive_int),
    Variable("DART_CLAIM_WAIT", "seconds a grid waits for a cell another process computes before it gives up; "
             "default 21600 (6 hours)", _positive_int),
    Variable("DART_READS_LOG", "set by the runner for a notebook's kernel: the file where dartlib records the "
             "repository files the kernel reads (dartlib.provenance); not for users", _file_in_folder),
    Variable("DART_TRACEBACK", "1: an unexpected error shows its full traceback, not one line; default 0",
             _one_of("0", "1")),
    *[Variable(f"DART_{name}_DIR", f"where the {name.lower()} data set is read from", _folder) for name in DATA_FOLDERS],
]}


def setting(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of the suite's variable ``name`` (stripped; "" when unset), checked: an invalid
    value raises :class:`EnvironmentSettingError`. Every reader of a ``DART_*`` variable reads it
    here, so the value used is the value checked."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    problem = VARIABLES[name].check(value) if value else ""
    if problem:
        raise EnvironmentSettingError(name, value, problem)
    return value


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Check every variable of :data:`VARIABLES` that is set; the first invalid one raises
    :class:`EnvironmentSettingError`."""
    for name in VARIABLES:
        setting(name, environ)
