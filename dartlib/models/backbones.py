"""Backbones with batch norm: the paper's ResNet-26, a narrow variant, a small CNN, ResNet-50.

The CIFAR ResNet-26 is the network of the Conjugate-PL code the paper takes its source models
from (Appendix A, "Details about pre-training"): BasicBlocks [3, 3, 3, 3] with widths
64/128/256/512, a 3x3 stem without max-pool, 1x1 conv + BN shortcuts where the shape changes,
4x4 average pooling and a linear head; inputs in [0, 1] are normalised inside the model.
Module names follow that code (conv1, bn1, layer1..layer4, shortcut, linear), so its released
checkpoints load after stripping the ``module.`` prefix (:func:`load_conjugate_pl_checkpoint`).

Every model exposes ``features(x)`` (the penultimate representation, used by LAME and the
additive-parameter ablation) and ``head`` (the last linear layer).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from dartlib.registry import Registry

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2023, 0.1994, 0.2010)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
BN_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d)


class ModelMissingError(FileNotFoundError):
    """A checkpoint or weight file is absent; the message says where it was expected and how to get it."""

    def __init__(self, what: str, path: Path | str, remedy: str) -> None:
        self.path = Path(path)
        super().__init__(f"{what} not found: expected {path}. To obtain it: {remedy}")


class Normalize(nn.Module):
    """(x - mean) / std per channel, for inputs in [0, 1]."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """A CIFAR ResNet of BasicBlocks with input normalisation inside."""

    def __init__(
        self,
        num_classes: int,
        *,
        blocks: Sequence[int] = (3, 3, 3, 3),
        width: int = 64,
        mean: Sequence[float] = CIFAR10_MEAN,
        std: Sequence[float] = CIFAR10_STD,
    ) -> None:
        super().__init__()
        self.normalize = Normalize(mean, std)
        self.conv1 = nn.Conv2d(3, width, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        in_planes = width
        stages = []
        for i, n in enumerate(blocks):
            planes = width * 2**i
            layers = []
            for j in range(n):
                layers.append(BasicBlock(in_planes, planes, stride=(1 if i == 0 else 2) if j == 0 else 1))
                in_planes = planes
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(in_planes, num_classes)
        self.feature_dim = in_planes

    @property
    def head(self) -> nn.Linear:
        return self.linear

    def features(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(self.normalize(x))))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        return F.avg_pool2d(out, out.shape[-1]).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x))


def resnet26(num_classes: int, *, width: int = 64, mean: Sequence[float] = CIFAR10_MEAN,
             std: Sequence[float] = CIFAR10_STD) -> CifarResNet:
    """The paper's CIFAR backbone (17,444,682 parameters for width 64 and 10 classes);
    ``width=16`` is the narrow variant of the cpu profile. Inputs: float in [0, 1], 32 x 32."""
    return CifarResNet(num_classes, blocks=(3, 3, 3, 3), width=width, mean=mean, std=std)


class SmallCNN(nn.Module):
    """The smoke profile's backbone: four 3x3 conv + BN + ReLU layers, global pooling, linear head."""

    def __init__(self, num_classes: int, *, width: int = 32, mean: Sequence[float] = (0.5, 0.5, 0.5),
                 std: Sequence[float] = (0.25, 0.25, 0.25)) -> None:
        super().__init__()
        self.normalize = Normalize(mean, std)
        chans = [3, width, width, 2 * width, 4 * width]
        layers: list[nn.Module] = []
        for i in range(4):
            layers += [nn.Conv2d(chans[i], chans[i + 1], 3, padding=1, bias=False), nn.BatchNorm2d(chans[i + 1]),
                       nn.ReLU(inplace=True)]
            if i in (1, 2):
                layers.append(nn.MaxPool2d(2))
        self.body = nn.Sequential(*layers)
        self.linear = nn.Linear(chans[-1], num_classes)
        self.feature_dim = chans[-1]

    @property
    def head(self) -> nn.Linear:
        return self.linear

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.normalize(x)).mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x))


def small_cnn(num_classes: int, *, width: int = 16) -> SmallCNN:
    return SmallCNN(num_classes, width=width)


class TorchvisionResNet50(nn.Module):
    """torchvision's ResNet-50 with ImageNet normalisation inside and a ``features``/``head`` split."""

    def __init__(self, num_classes: int, *, weights: str | None = None) -> None:
        super().__init__()
        import torchvision

        tv_weights = None
        if weights == "imagenet":
            tv_weights = torchvision.models.ResNet50_Weights.IMAGENET1K_V1
            _require_hub_file(tv_weights.url)
        elif weights is not None:
            raise ValueError(f"unknown weights {weights!r}; valid: None, 'imagenet'")
        self.normalize = Normalize(IMAGENET_MEAN, IMAGENET_STD)
        self.net = torchvision.models.resnet50(weights=tv_weights)
        if num_classes != self.net.fc.out_features:
            self.net.fc = nn.Linear(self.net.fc.in_features, num_classes)
        self.feature_dim = self.net.fc.in_features

    @property
    def head(self) -> nn.Linear:
        return self.net.fc

    def features(self, x: torch.Tensor) -> torch.Tensor:
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(self.normalize(x)))))
        x = n.layer4(n.layer3(n.layer2(n.layer1(x))))
        return torch.flatten(n.avgpool(x), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.fc(self.features(x))


def _require_hub_file(url: str) -> None:
    path = Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[-1]
    if not path.is_file():
        raise ModelMissingError("torchvision ImageNet weights", path,
                                f"download {url} into {path.parent} (torch.hub's cache; needs internet once)")


def resnet50(num_classes: int = 1000, *, weights: str | None = None) -> TorchvisionResNet50:
    """ResNet-50 for PACS, OfficeHome and ImageNet-C; ``weights='imagenet'`` = torchvision's V1."""
    return TorchvisionResNet50(num_classes, weights=weights)


ARCHITECTURES: Registry = Registry(
    "architecture",
    {
        "resnet26": resnet26,
        "resnet26-w16": lambda num_classes: resnet26(num_classes, width=16),
        "resnet26-w8": lambda num_classes: resnet26(num_classes, width=8),  # the backbone-strength study
        "small-cnn": small_cnn,
        "resnet50": resnet50,
        # ImageNet-pretrained initialisation, fine-tuned on a source domain (PACS, OfficeHome, DomainNet-126)
        "resnet50-imagenet": lambda num_classes: resnet50(num_classes, weights="imagenet"),
    },
)


def build(arch: str, *, num_classes: int) -> nn.Module:
    """A fresh model of a registered architecture."""
    return ARCHITECTURES[arch](num_classes)


def count_parameters(model: nn.Module, *, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


# --------------------------------------------------------------------------- checkpoints


def load_conjugate_pl_checkpoint(path: Path | str, model: CifarResNet) -> CifarResNet:
    """Load a Conjugate-PL ResNet-26 checkpoint (``{"net": state_dict}``, keys prefixed ``module.``).

    Normalisation constants are part of our model, so extra normalisation entries of the file
    are ignored; every weight of ``model`` must be present.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelMissingError("Conjugate-PL ResNet-26 checkpoint", path,
                                "take saved_models/pretrained/cifar10_train_aug_res26_poly_eps6.pth from "
                                "github.com/locuslab/tta_conjugate (or train one: python -m dartlib train)")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    state = blob.get("net", blob)
    state = {k.removeprefix("module."): v for k, v in state.items()}
    state = {k: v for k, v in state.items() if k in model.state_dict()}
    missing = set(model.state_dict()) - set(state)
    if missing:
        raise KeyError(f"{path} lacks {len(missing)} weights of our ResNet-26, e.g. {sorted(missing)[:3]}")
    model.load_state_dict(state)
    return model


# --------------------------------------------------------------------------- batch-norm helpers


def bn_layers(model: nn.Module) -> Iterator[nn.modules.batchnorm._BatchNorm]:
    return (m for m in model.modules() if isinstance(m, BN_TYPES))


def use_batch_statistics(model: nn.Module) -> nn.Module:
    """BN-adapt mode, in place: every BN layer normalises with the current batch's statistics
    and leaves its running statistics untouched; all other layers stay in eval mode."""
    model.eval()
    for bn in bn_layers(model):
        bn.train()
        bn.track_running_stats = False  # with training=True: batch statistics, buffers not updated
    return model


def use_source_statistics(model: nn.Module) -> nn.Module:
    """NoAdapt mode, in place: eval mode with the stored running statistics."""
    model.eval()
    for bn in bn_layers(model):
        bn.track_running_stats = True
    return model


def frozen_bn_adapted(model: nn.Module) -> nn.Module:
    """A frozen deep copy of ``model`` in BN-adapt mode (DART's f_theta0_bar, Section 3)."""
    frozen = use_batch_statistics(copy.deepcopy(model))
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen


class _GroupedBN(nn.Module):
    """A BN layer in BN-adapt mode applied to ``n // group`` consecutive batches of ``group``
    images at once, each normalised with its own (biased) statistics, as ``F.batch_norm`` in
    training mode without running statistics does for one batch."""

    def __init__(self, bn: nn.modules.batchnorm._BatchNorm, holder: list) -> None:
        super().__init__()
        self.weight, self.bias, self.eps, self.holder = bn.weight, bn.bias, bn.eps, holder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = self.holder[0]
        n, c = x.shape[:2]
        if group is None or group == n:
            return F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        rest = x.shape[2:]
        xv = x.reshape(n // group, group, c, *rest)
        var, mean = torch.var_mean(xv.float(), dim=(1, *range(3, xv.ndim)), correction=0, keepdim=True)
        shape = (1, 1, c) + (1,) * len(rest)
        scale = torch.rsqrt(var + self.eps)
        if self.weight is not None:
            scale = scale * self.weight.float().view(shape)
        shift = -mean * scale
        if self.bias is not None:
            shift = shift + self.bias.float().view(shape)
        return torch.addcmul(shift.to(x.dtype), xv, scale.to(x.dtype)).reshape(x.shape)


class GroupedBNAdapted(nn.Module):
    """:func:`frozen_bn_adapted` that takes many batches in one call: ``forward(x, group=g)`` (and
    ``features``) normalise every run of ``g`` consecutive images with their own statistics, so the
    result equals the frozen model's outputs batch by batch, concatenated, in one forward (what g_phi's
    intermediate training runs on a GPU, several intermediate batches at a time)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.net = frozen_bn_adapted(model)
        self._holder: list = [None]
        for name, module in list(self.net.named_modules()):
            if isinstance(module, BN_TYPES):
                parent = self.net.get_submodule(name.rsplit(".", 1)[0]) if "." in name else self.net
                setattr(parent, name.rsplit(".", 1)[-1], _GroupedBN(module, self._holder))

    @property
    def head(self) -> nn.Linear:
        return self.net.head

    def _run(self, fn, x: torch.Tensor, group: int | None) -> torch.Tensor:
        if group is not None and x.shape[0] % group:
            raise ValueError(f"{x.shape[0]} images do not split into batches of {group}")
        self._holder[0] = group
        try:
            return fn(x)
        finally:
            self._holder[0] = None

    @torch.no_grad()
    def forward(self, x: torch.Tensor, group: int | None = None) -> torch.Tensor:
        return self._run(self.net, x, group)

    @torch.no_grad()
    def features(self, x: torch.Tensor, group: int | None = None) -> torch.Tensor:
        return self._run(self.net.features, x, group)


class _Bf16Forward:
    """Mixin: ``forward`` (and ``features``) under bfloat16 autocast, float32 out; everything
    outside the backbone (refiner, losses, softmax statistics) stays in float32."""

    def forward(self, x):  # noqa: D401
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = super().forward(x)
        return out.float()

    def features(self, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = super().features(x)
        return out.float()


_BF16_CLASSES: dict[type, type] = {}


def bf16_forward(model: nn.Module) -> nn.Module:
    """``model`` (in place) with its forward under bfloat16 autocast on a GPU; deep copies keep it
    (a test-time method's copies of the backbone, :mod:`dartlib.devices`)."""
    cls = type(model)
    if issubclass(cls, _Bf16Forward):
        return model
    if cls not in _BF16_CLASSES:
        _BF16_CLASSES[cls] = type(f"Bf16{cls.__name__}", (_Bf16Forward, cls), {})
    model.__class__ = _BF16_CLASSES[cls]
    return model


TRAINABLE = ("bn-affine", "all", "none")


def set_trainable(model: nn.Module, which: str = "bn-affine") -> list[nn.Parameter]:
    """Choose which parameters a test-time method may train; returns them (BN affine by default)."""
    if which not in TRAINABLE:
        raise ValueError(f"unknown trainable set {which!r}; valid: {', '.join(TRAINABLE)}")
    for p in model.parameters():
        p.requires_grad_(which == "all")
    if which == "bn-affine":
        for bn in bn_layers(model):
            for p in (bn.weight, bn.bias):
                if p is not None:
                    p.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]
