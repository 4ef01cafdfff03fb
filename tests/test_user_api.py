"""What a user of the library meets first: wrap's refiner optional, a method of one's own usable
by name, and an optional command that names the extra it needs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dartlib.models.backbones import use_batch_statistics
from dartlib.tta import METHODS, Adapter, BNAdapt
from dartlib.tta.wrap import stream_accuracy, wrap


def grey_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 3))


def grey_batch(n: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 1, 10, 10, generator=torch.Generator().manual_seed(seed))


def test_wrap_gives_the_method_alone_without_a_refiner():
    model, x = grey_model(), grey_batch()
    alone = wrap("tent", model=model, device="cpu")
    assert alone.refiner is None
    reference = wrap("tent", model=model, refiner=None, device="cpu")
    torch.testing.assert_close(alone(x), reference(x))


class Halved(Adapter):
    """BNAdapt with its logits halved: a method of a user's own, defined outside dartlib."""

    name = "halved-bnadapt"

    def __init__(self, model: nn.Module, *, refiner=None) -> None:
        super().__init__(model, refiner=refiner)
        use_batch_statistics(self.model)

    @torch.no_grad()
    def adapt(self, x, refine):
        return refine(self.model(x)) / 2


def test_a_users_adapter_is_usable_by_name_once_defined():
    assert METHODS["halved-bnadapt"] is Halved
    assert list(METHODS)[:11] == ["noadapt", "bnadapt", "tent", "pl", "note", "delta", "ods", "lame", "sar", "memo",
                                  "roid"]
    model, x = grey_model(), grey_batch()
    mine, bn = wrap("halved-bnadapt", model=model, device="cpu"), wrap("bnadapt", model=model, device="cpu")
    torch.testing.assert_close(mine(x), bn(x) / 2)
    labels = np.arange(12) % 3
    images = (x.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
    assert 0.0 <= stream_accuracy(mine, (images, labels), num_classes=3, batch_size=6, device="cpu") <= 100.0


def test_a_name_a_method_holds_is_refused_and_a_redefinition_replaces_itself():
    with pytest.raises(ValueError, match="method name 'tent' is taken by dartlib.tta.basic.Tent"):
        type("MyTent", (Adapter,), {"name": "tent", "__module__": "mine", "adapt": lambda self, x, refine: x})
    first = type("Again", (BNAdapt,), {"name": "again", "__module__": "mine"})
    second = type("Again", (BNAdapt,), {"name": "again", "__module__": "mine"})  # a cell run twice
    assert METHODS["again"] is second is not first
    with pytest.raises(ValueError, match="'again' is taken by mine.Again; give other.Again another name"):
        type("Again", (BNAdapt,), {"name": "again", "__module__": "other"})


def test_an_optional_command_without_its_extra_names_the_line_that_installs_it(monkeypatch, capsys):
    import sys

    from dartlib.cli import main
    from dartlib.cli.common import EXIT_MISSING

    monkeypatch.setitem(sys.modules, "nbformat", None)  # import nbformat now raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "dartlib.runner", raising=False)
    monkeypatch.delenv("DART_TRACEBACK", raising=False)
    assert main(["lab", "--no-browser"]) == EXIT_MISSING
    err = capsys.readouterr().err.strip()
    assert err == ("error: `python -m dartlib lab` needs nbformat, which the notebooks extra installs: "
                   "pip install 'dartlib[notebooks]' (in a checkout: pip install -e '.[notebooks]', or make setup "
                   "for every extra)")
