"""A model of the user's own, as ``python -m dartlib choose-alpha --model`` names it (docs/using-dart.md):
the code that builds it (a file or a module, and a name in it) or a TorchScript file, with an optional
state dict loaded into it. DART (Section 3) needs only a model that maps images to logits and has
BatchNorm layers; what the model is, is the user's."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import torch
from torch import nn

from dartlib.models.checkpoints import load_weights


class ModelSpecError(ValueError):
    """A model or weights that cannot be read as named; the message names the option (``--model``,
    ``--weights``), the file and what to give instead."""


def _from_code(spec: str) -> object:
    """``FILE.py:NAME`` or ``package.module:NAME``: the object NAME, called when it is a function."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ModelSpecError(f"--model {spec}: give FILE.py:NAME or package.module:NAME (NAME a model or a function "
                             "returning one), or a .pt file of a saved model")
    if where.endswith(".py"):
        if not Path(where).is_file():
            raise ModelSpecError(f"--model {spec}: no such file {where}")
        module_spec = importlib.util.spec_from_file_location(Path(where).stem, where)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    if not hasattr(module, name):
        raise ModelSpecError(f"--model {spec}: {where} has no {name!r}")
    model = getattr(module, name)
    return model() if not isinstance(model, nn.Module) and callable(model) else model


def load_model(spec: str, *, weights: str | None = None) -> nn.Module:
    """The ``nn.Module`` that ``spec`` names, in eval mode: ``FILE.py:NAME`` or ``package.module:NAME``,
    NAME being a module instance or a callable that returns one (called without arguments); or a
    TorchScript ``.pt``/``.pth`` file (``torch.jit.save``; a pickled module is not read, since
    unpickling runs the code a file carries). ``weights``: a state dict file
    (``torch.save(model.state_dict())``, read with ``weights_only=True``) loaded into it.
    Raises :class:`ModelSpecError` for a name, a file or weights that do not give a model."""
    if spec.endswith((".pt", ".pth")) and ":" not in spec:
        path = Path(spec)
        if not path.is_file():
            raise ModelSpecError(f"--model {spec}: no such file")
        try:
            model = torch.jit.load(str(path), map_location="cpu")
        except RuntimeError as err:
            raise ModelSpecError(f"--model {spec} is not a TorchScript file ({err.__class__.__name__}): give "
                                 "FILE.py:NAME (the code that builds the model) and --weights with its state dict, or "
                                 "save it with torch.jit.save(torch.jit.script(model), path)") from None
    else:
        model = _from_code(spec)
    if not isinstance(model, nn.Module):
        raise ModelSpecError(f"--model {spec} gives a {type(model).__name__}, not a torch.nn.Module")
    if weights:
        state = load_weights(Path(weights))
        state = state.get("model", state.get("state_dict", state))
        try:
            model.load_state_dict(state)
        except RuntimeError as err:
            raise ModelSpecError(f"--weights {weights} does not fit --model {spec}: {err}") from None
    return model.eval()
