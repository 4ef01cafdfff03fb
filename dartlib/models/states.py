"""Resume states: what a long training saves between epochs (a g_phi pass, NOTE's IABN fine-tuning, a
source model's training), sealed with a digest of its contents and checked before it is continued.

A state is continued only when its digest (where it has one: states saved before the digest was
added have none) matches its contents and its invariants hold (epoch counts in range and agreeing
with the optimiser's steps and the log, every tensor of the shape the model needs and finite); any
other is set aside (:func:`dartlib.data.files.set_aside`) with one warning naming it, and the work
starts over. A resumed training is exact only from an exact state: a scaled weight or a padded log
would otherwise end, silently, in a saved model that no run of the code produces.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from dartlib.data.files import DamagedFileError, DiscardedStateWarning, set_aside
from dartlib.models.checkpoints import load_weights

DIGEST = "digest"  # the entry of a sealed state that holds the digest of the others


class StateProblem(ValueError):
    """What makes a saved state unfit to continue (the message says what, in a few words)."""


def _feed(h, value) -> None:
    """Hash ``value`` (nested mappings, sequences, tensors and plain values) in a fixed order."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, Mapping):
        h.update(f"M{len(value)}".encode())
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key])
    elif isinstance(value, (list, tuple)):
        h.update(f"L{len(value)}".encode())
        for item in value:
            _feed(h, item)
    else:
        h.update(f"V{type(value).__name__}:{value!r}".encode())


def state_digest(state: Mapping) -> str:
    """sha256 over every entry of ``state`` but :data:`DIGEST` (tensors by dtype, shape and bytes)."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != DIGEST})
    return h.hexdigest()


def sealed(state: dict) -> dict:
    """``state`` with its :func:`state_digest` added, as it is saved."""
    return {**state, DIGEST: state_digest(state)}


def same_tensors(what: str, saved: object, wanted: Mapping[str, torch.Tensor]) -> None:
    """Raise :class:`StateProblem` unless ``saved`` maps exactly ``wanted``'s names to finite
    tensors of the same shapes (a module's ``state_dict``)."""
    if not isinstance(saved, Mapping) or set(saved) != set(wanted):
        raise StateProblem(f"{what} does not hold the entries of the model being trained")
    for name, tensor in wanted.items():
        value = saved[name]
        if not isinstance(value, torch.Tensor) or value.shape != tensor.shape:
            shape = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise StateProblem(f"{what}'s {name} has shape {shape}, the model needs {list(tensor.shape)}")
        finite_tensor(f"{what}'s {name}", value)


def finite_tensor(what: str, value: torch.Tensor) -> None:
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise StateProblem(f"{what} holds NaN or infinite values")


def optimizer_state(what: str, saved: object, opt: torch.optim.Optimizer, *, steps: int | None) -> None:
    """Raise :class:`StateProblem` unless ``saved`` is a state of ``opt`` (same parameter groups and
    sizes; every per-parameter tensor shaped as its parameter and finite) and, where ``steps`` is
    given (Adam), every parameter's step count is ``steps``."""
    mine = opt.state_dict()
    if (not isinstance(saved, Mapping) or not isinstance(saved.get("param_groups"), list)
            or not isinstance(saved.get("state"), Mapping)
            or [len(g.get("params", ())) for g in saved["param_groups"]] != [len(g["params"]) for g in mine["param_groups"]]):
        raise StateProblem(f"{what} is not a state of this optimiser (other parameter groups)")
    params = [p for group in opt.param_groups for p in group["params"]]
    ids = [i for group in mine["param_groups"] for i in group["params"]]
    shapes = dict(zip(ids, (p.shape for p in params)))
    for key, entry in saved["state"].items():
        if key not in shapes or not isinstance(entry, Mapping):
            raise StateProblem(f"{what} holds the state of a parameter the model lacks ({key!r})")
        for name, value in entry.items():
            if not isinstance(value, torch.Tensor):
                continue
            if name == "step":
                if steps is not None and float(value) != steps:
                    raise StateProblem(f"{what} counts {float(value):g} steps for a parameter, the state {steps}")
            elif value.shape != shapes[key]:
                raise StateProblem(f"{what}'s {name} has shape {list(value.shape)}, its parameter {list(shapes[key])}")
            else:
                finite_tensor(f"{what}'s {name}", value)


def count(what: str, value: object, *, low: int, high: int) -> int:
    """``value`` as an int in [low, high], else :class:`StateProblem`."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise StateProblem(f"{what} is {value!r}, not a whole number from {low} to {high}")
    return value


def seconds(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise StateProblem(f"its seconds entry is {value!r}, not a finite non-negative number")
    return float(value)


def rng_state(value: object) -> torch.Tensor:
    """A torch CPU random-number state (the shape :func:`torch.get_rng_state` gives)."""
    own = torch.get_rng_state()
    if not isinstance(value, torch.Tensor) or value.dtype != own.dtype or value.shape != own.shape:
        raise StateProblem("its torch_rng entry is not a random-number generator state")
    return value.cpu()


def epoch_log(what: str, log: object, *, epochs: int) -> list[dict]:
    """A per-epoch log of exactly ``epochs`` entries numbered 1..``epochs`` with finite values."""
    if not isinstance(log, list) or len(log) != epochs:
        size = len(log) if isinstance(log, list) else type(log).__name__
        raise StateProblem(f"{what} has {size} entries for {epochs} epochs done")
    for i, entry in enumerate(log):
        if not isinstance(entry, Mapping) or entry.get("epoch") != i + 1:
            raise StateProblem(f"{what}'s entry {i + 1} is not that of epoch {i + 1}")
        bad = [k for k, v in entry.items() if isinstance(v, float) and not math.isfinite(v)]
        if bad:
            raise StateProblem(f"{what}'s entry {i + 1} has a non-finite {bad[0]}")
    return list(log)


def open_state(path: Path, *, what: str, required: tuple[str, ...], check: Callable[[dict], None],
               map_location: str = "cpu") -> dict | None:
    """The state saved at ``path`` when it is fit to continue, else None (no file; or, after one
    :class:`~dartlib.data.files.DiscardedStateWarning` naming it, a damaged file, a digest that does
    not match, or ``check(state)`` raising :class:`StateProblem`: the file is then set aside).
    ``what``: the work that starts over, for the warning. A state without a digest (saved before
    states were sealed) is accepted when ``check`` passes."""
    if not path.is_file():
        return None
    try:
        state = load_weights(path, map_location=map_location, required=required)
        stored = state.get(DIGEST)
        if stored is not None and stored != state_digest(state):
            raise StateProblem("its contents do not match the digest stored with them (altered after it was saved)")
        check(state)
    except (DamagedFileError, StateProblem) as err:
        problem = err.problem if isinstance(err, DamagedFileError) else str(err)
        aside = set_aside(path)
        warnings.warn(f"{path} is damaged: {problem}; set aside as {aside.name}, {what} starts over",
                      DiscardedStateWarning, stacklevel=3)
        return None
    return state
