"""What the public API is given is checked, and a refusal says what to change: BatchNorm layers
where the method needs them, the batch's dtype, range and channels, the class count against the
logits; MEMO and ROID take grey images of any size."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dartlib.dart.fit import SettingError
from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.data.augmentation import augmix_views, cotta_view
from dartlib.tta.wrap import stream_accuracy, wrap

K = 4


def bn_model(channels: int = 3) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(channels, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, K))


def no_bn_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, K))


def identity_refiner() -> Refiner:
    return Refiner(module=RefinementModule(K, hidden=8), config=DartConfig())


@pytest.mark.parametrize("method", ["bnadapt", "tent", "pl", "sar", "delta", "memo", "roid", "note"])
def test_a_method_that_adapts_through_batchnorm_refuses_a_model_without_it(method):
    with pytest.raises(SettingError, match=rf"has no BatchNorm1d/2d/3d layer and {method} adapts through BatchNorm"):
        wrap(method, model=no_bn_model(), refiner=None, device="cpu")


def test_noadapt_takes_a_model_without_batchnorm_but_dart_does_not():
    x = torch.rand(8, 3, 8, 8)
    assert wrap("noadapt", model=no_bn_model(), refiner=None, device="cpu")(x).shape == (8, K)
    with pytest.raises(SettingError, match="DART reads the batch's statistics from the BN-adapted model"):
        wrap("noadapt", model=no_bn_model(), refiner=identity_refiner(), device="cpu")


@pytest.mark.parametrize("batch, fix", [
    (lambda x: x * 255, r"values reach 2\d\d.*x / 255"),  # a float batch in 0..255
    (lambda x: (x * 255).to(torch.uint8), r"dtype torch.uint8.*x.float\(\) / 255"),
    (lambda x: (x - 0.5) / 0.25, "put the normalisation .* inside the model"),
    (lambda x: x.permute(0, 2, 3, 1), r"3 channels .*first convolution takes 3|8 channels .*x.permute\(0, 3, 1, 2\)"),
    (lambda x: x[:, :1], "1 channels .* first convolution takes 3"),
    (lambda x: x[0], r"shape \(3, 8, 8\): pass N x C x H x W"),
])
@pytest.mark.parametrize("method", ["bnadapt", "tent"])
def test_the_adapter_refuses_a_batch_the_model_was_not_made_for(method, batch, fix):
    adapter = wrap(method, model=bn_model(), refiner=None, device="cpu")
    x = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with pytest.raises(SettingError, match=fix):
        adapter(batch(x))
    assert adapter(x).shape == (8, K)  # a batch in [0, 1] is taken


def test_stream_accuracy_refuses_a_class_count_the_logits_do_not_have():
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, size=(40, 8, 8, 3), dtype=np.uint8), np.arange(40) % K
    adapter = wrap("bnadapt", model=bn_model(), refiner=None, device="cpu")
    with pytest.raises(SettingError, match=r"logits of shape \(20, 4\) but num_classes=12: .*num_classes=4"):
        stream_accuracy(adapter, (images, labels), num_classes=12, batch_size=20, device="cpu")
    assert 0.0 <= stream_accuracy(adapter, (images, labels), num_classes=K, batch_size=20, device="cpu") <= 100.0


@pytest.mark.parametrize("method", ["memo", "roid"])
@pytest.mark.parametrize("refiner", [None, identity_refiner()])
def test_memo_and_roid_take_grey_images_of_any_size(method, refiner):
    options = {"n_augmentations": 2} if method == "memo" else {}
    adapter = wrap(method, model=bn_model(channels=1), refiner=refiner, device="cpu", **options)
    x = torch.rand(6, 1, 12, 12, generator=torch.Generator().manual_seed(0))
    out = adapter(x)
    assert out.shape == (6, K) and torch.isfinite(out).all()


@pytest.mark.parametrize("size", [12, 28, 40])
def test_the_augmented_views_keep_the_shape_of_grey_and_rgb_images(size):
    for channels in (1, 3):
        x = torch.rand(3, channels, size, size, generator=torch.Generator().manual_seed(0))
        views = augmix_views(x, n_views=2, generator=torch.Generator().manual_seed(0))
        assert views.shape == (2, 3, channels, size, size) and 0 <= float(views.min()) <= float(views.max()) <= 1
        view = cotta_view(x, generator=torch.Generator().manual_seed(0))
        assert view.shape == x.shape and 0 <= float(view.min()) <= float(view.max()) <= 1
    with pytest.raises(ValueError, match="with 1 .grey. or 3 .RGB. channels in .0, 1., got shape .3, 2, "):
        augmix_views(torch.rand(3, 2, size, size), n_views=1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="ROID's augmented view takes a float batch N x C x H x W with 1"):
        cotta_view(torch.rand(3, 4, size, size), generator=torch.Generator().manual_seed(0))
