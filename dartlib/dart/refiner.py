"""DART: label distribution shift-aware prediction refinement (Sections 3-4, Appendices A-B).

A refinement module g_phi maps two statistics of a batch, computed from the frozen BN-adapted
source model f_theta0_bar, to an affine map of the logits:

    p_bar = mean softmax,  d = mean CE(u, softmax)  (u uniform)          (Section 2)
    W, b = g_phi(p_bar, d);  refined logits = f(x) W + b                 (Section 3)

g_phi is trained once per source classifier at an "intermediate time" on the labelled training
data: Dirichlet-sampled (class-imbalanced) batches drive L_imb (Eq. 1), i.i.d. batches drive the
identity regulariser L_bal (Eq. 2), L = L_imb + alpha * L_bal (Eq. 3).

Parameterisation (our choice; the paper does not say): the MLP's output layer starts at zero and
its output is read as a *residual* around the identity, W = I + dW, b = db, so an untrained
module leaves predictions unchanged and L_bal pulls towards the starting point. ``direct``
reads W itself from the output (default PyTorch initialisation), for comparison.

The additive-parameter variant of Table 5 (``outputs="additive"``, inspired by LSA) instead emits
an affine transform of the penultimate features and a difference for the last linear layer's
weights; its hidden width is chosen so that g_phi keeps the affine module's parameter count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

OUTPUTS = ("wb", "w", "b")  # the affine refinement; "additive" selects AdditiveRefinementModule
INPUTS = ("pbar-d", "pbar")
PARAMETERISATIONS = ("residual", "direct")
CHUNK_ORDERS = ("blocks", "shuffled")
# Fields added to DartConfig after refiners were committed: they enter a config's dict (and so the
# refiner's file name and every digest) only when set away from their default, so that the
# refiners trained before them keep their names.
LATER_FIELDS = {"chunk_order": "blocks", "mix_n_dir": 0}


def batch_statistics(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(p_bar, d) of a batch of logits: the mean softmax (K,) and the prediction deviation,
    the batch mean of CE(u, softmax(l)) = -(1/K) sum_k log softmax(l)_k (a scalar)."""
    log_p = F.log_softmax(logits, dim=1)
    return log_p.exp().mean(0), -log_p.mean(1).mean(0)


def refine(logits: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """f(x) W + b for every row of ``logits``."""
    return logits @ w + b


def norm_preserving(refined: torch.Tensor, original: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Rescale each refined logit vector to the L2 norm of the unrefined one (Appendix A,
    "Details about test-time adaptation"), for entropy-based losses."""
    scale = original.norm(dim=1, keepdim=True) / refined.norm(dim=1, keepdim=True).clamp_min(eps)
    return refined * scale


class RefinementModule(nn.Module):
    """g_phi: a 2-layer MLP (hidden 1000, ReLU) from [p_bar, d] to (W, b)."""

    def __init__(self, num_classes: int, *, hidden: int = 1000, inputs: str = "pbar-d", outputs: str = "wb",
                 parameterisation: str = "residual", diagonal_only: bool = False) -> None:
        super().__init__()
        for value, valid, what in ((inputs, INPUTS, "inputs"), (outputs, OUTPUTS, "outputs"),
                                   (parameterisation, PARAMETERISATIONS, "parameterisation")):
            if value not in valid:
                raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(valid)}")
        self.k, self.inputs, self.outputs = num_classes, inputs, outputs
        self.parameterisation, self.diagonal_only = parameterisation, diagonal_only
        n_in = num_classes + (1 if inputs == "pbar-d" else 0)
        n_w = (num_classes if diagonal_only else num_classes * num_classes) if "w" in outputs else 0
        n_b = num_classes if "b" in outputs else 0
        self.n_w, self.n_b = n_w, n_b
        self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_w + n_b))
        if parameterisation == "residual":
            nn.init.zeros_(self.net[2].weight)
            nn.init.zeros_(self.net[2].bias)

    def forward(self, p_bar: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """p_bar (..., K), d (...) -> W (..., K, K), b (..., K)."""
        x = torch.cat([p_bar, d[..., None]], dim=-1) if self.inputs == "pbar-d" else p_bar
        out = self.net(x)
        lead = out.shape[:-1]
        eye = torch.eye(self.k, device=out.device, dtype=out.dtype)
        if self.n_w == 0:
            w = eye.expand(*lead, self.k, self.k)
        elif self.diagonal_only:
            diag = out[..., : self.n_w]
            w = torch.diag_embed(diag + 1.0 if self.parameterisation == "residual" else diag)
        else:
            w = out[..., : self.n_w].reshape(*lead, self.k, self.k)
            if self.parameterisation == "residual":
                w = w + eye
        b = out[..., self.n_w :] if self.n_b else torch.zeros(*lead, self.k, device=out.device, dtype=out.dtype)
        return w, b


def matched_hidden(num_classes: int, feature_dim: int, *, hidden: int = 1000, inputs: str = "pbar-d") -> int:
    """Hidden width of the additive-parameter g_phi with (nearly) the parameter count of the
    affine g_phi of width ``hidden`` (Table 5: "we maintain the number of parameters of g_phi")."""
    n_in = num_classes + (1 if inputs == "pbar-d" else 0)
    target = (n_in + 1) * hidden + (hidden + 1) * (num_classes * num_classes + num_classes)
    n_out = 2 * feature_dim + num_classes * feature_dim
    return max(1, round((target - n_out) / (n_in + 1 + n_out)))


class AdditiveRefinementModule(nn.Module):
    """The additive-parameter variant of g_phi (Appendix, Table 5): from [p_bar, d] to a scale
    and shift of the penultimate features z and a difference dW of the last layer's weights;
    refined logits ((1 + gamma) * z + beta) (W_fc + dW)^T + b_fc. The output layer starts at
    zero, so an untrained module leaves predictions unchanged (our choice, as for the affine one)."""

    def __init__(self, num_classes: int, feature_dim: int, *, hidden: int, inputs: str = "pbar-d") -> None:
        super().__init__()
        if inputs not in INPUTS:
            raise ValueError(f"unknown inputs {inputs!r}; valid: {', '.join(INPUTS)}")
        self.k, self.f, self.inputs = num_classes, feature_dim, inputs
        n_in = num_classes + (1 if inputs == "pbar-d" else 0)
        self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, 2 * feature_dim + num_classes * feature_dim))
        nn.init.zeros_(self.net[2].weight)
        nn.init.zeros_(self.net[2].bias)

    def forward(self, p_bar: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """p_bar (..., K), d (...) -> gamma (..., F), beta (..., F), dW (..., K, F)."""
        x = torch.cat([p_bar, d[..., None]], dim=-1) if self.inputs == "pbar-d" else p_bar
        out = self.net(x)
        f = self.f
        return out[..., :f], out[..., f : 2 * f], out[..., 2 * f :].reshape(*out.shape[:-1], self.k, f)


def additive_refine(features: torch.Tensor, head: tuple[torch.Tensor, torch.Tensor],
                    params: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Logits of the last linear layer ``head`` = (weight (K, F), bias (K,)) modified by the
    additive parameters (gamma, beta, dW) on penultimate ``features`` (B, F)."""
    gamma, beta, dw = params
    weight, bias = head
    return (features * (1.0 + gamma) + beta) @ (weight + dw).transpose(-1, -2) + bias


class SeverityDetector(nn.Module):
    """DART-split's g_phi1: one linear unit on d; s = sigmoid(g(d)) (Appendix B).

    Our parameterisation: d enters standardised, (d - center) / scale, with constants that
    :meth:`calibrate` measures on the first intermediate batches, and the unit starts at zero
    (s = 0.5, boundary at ``center``). It is the same function class as a linear unit on raw d,
    but one that Adam at lr 1e-3 fits within the intermediate epochs: on raw d (about 8 on i.i.d.
    batches, about 1 lower on Dirichlet ones) the bias must travel about 8 |w|, and a detector
    trained that way stayed at its initialisation (BCE near ln 2 or worse, on both profiles).
    """

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        self.register_buffer("center", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    @torch.no_grad()
    def calibrate(self, d: torch.Tensor) -> None:
        """Standardise with the mean and standard deviation of the prediction deviations ``d``
        (training batches only)."""
        self.center.copy_(d.mean())
        self.scale.copy_(d.std().clamp_min(1e-3))

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return self.linear(((d - self.center) / self.scale)[..., None]).squeeze(-1)  # logit of s


@dataclass(frozen=True)
class DartConfig:
    """Intermediate-time settings (Appendix A); the defaults are the paper's CIFAR-10 values."""

    variant: str = "dart"  # "dart" or "dart-split"
    alpha: float = 0.1
    delta: float = 10.0
    n_dir: int = 250
    batch_size: int = 64
    hidden: int = 1000
    epochs: int = 50
    lr: float = 1e-3
    inputs: str = "pbar-d"
    outputs: str = "wb"
    parameterisation: str = "residual"
    diagonal_only: bool = False
    sampling: str = "dirichlet"  # or "unif-lt": uniform, LT rho=20 and inverse LT rho=20 batches
    per_class: int | None = None  # size of the class-balanced D_int per class (None: all)
    seed: int = 0
    # The order of the classes inside a Dirichlet chunk, which the paper leaves open: "blocks" (NOTE's
    # procedure: each class contiguous) or "shuffled" (the chunk's images in random order).
    chunk_order: str = "blocks"
    # Not the paper's: with a value, every other Dirichlet batch comes from a second stream cut into
    # this many chunks (a mixture of batch kinds, e.g. 10: near-single-class batches between the
    # N_dir ones); 0: one stream, as in the paper.
    mix_n_dir: int = 0

    def __post_init__(self) -> None:
        if self.variant not in ("dart", "dart-split"):
            raise ValueError(f"unknown variant {self.variant!r}; valid: dart, dart-split")
        if self.outputs not in (*OUTPUTS, "additive"):
            raise ValueError(f"unknown outputs {self.outputs!r}; valid: {', '.join((*OUTPUTS, 'additive'))}")
        if self.outputs == "additive" and self.variant != "dart":
            raise ValueError("the additive-parameter variant exists for DART only, not DART-split")
        if self.sampling not in ("dirichlet", "unif-lt"):
            raise ValueError(f"unknown sampling {self.sampling!r}; valid: dirichlet, unif-lt")
        if self.chunk_order not in CHUNK_ORDERS:
            raise ValueError(f"unknown chunk_order {self.chunk_order!r}; valid: {', '.join(CHUNK_ORDERS)}")
        if self.mix_n_dir < 0 or (self.mix_n_dir and self.sampling != "dirichlet"):
            raise ValueError(f"mix_n_dir={self.mix_n_dir}: a number of chunks (0: none), with sampling='dirichlet'")


# The paper's g_phi on CIFAR-10 (Appendix A: alpha 0.1, 50 epochs of Dirichlet batches of 64 from
# N_dir 250 chunks at delta 10, a 1,000-unit hidden layer, Adam at 1e-3), stated once: a profile at
# the paper's configuration and every refiner named after it (e.g. notebook 15's
# ``alpha0.1-epochs50``) derive from it.
PAPER_CIFAR10 = DartConfig()


@dataclass
class Refiner:
    """A trained DART (or DART-split) refiner, applied at test time.

    ``temperature``: a fixed multiplier of the logits of test batches (Appendix A: 2 on
    OfficeHome, 1.1 on CIFAR-100); ``adaptive_temperature``: the running-average T of
    Appendix B (ImageNet-C), computed from the source statistics in ``train_logit_stats``.
    """

    module: RefinementModule | AdditiveRefinementModule
    config: DartConfig
    detector: SeverityDetector | None = None
    temperature: float = 1.0
    adaptive_temperature: bool = False
    train_logit_stats: dict | None = None
    head: tuple[torch.Tensor, torch.Tensor] | None = None  # the source model's last layer (additive variant)
    _temperatures: list[float] = field(default_factory=list, repr=False)

    def reset(self) -> None:
        self._temperatures.clear()

    @property
    def reads_features(self) -> bool:
        """Whether it refines the penultimate features rather than the logits (the additive
        variant of Table 5): its caller passes ``features=``."""
        return self.config.outputs == "additive"

    def to(self, device: str | torch.device) -> Refiner:
        """Move g_phi (and the detector and head, where present) to ``device``, in place."""
        self.module.to(device)
        if self.detector is not None:
            self.detector.to(device)
        if self.head is not None:
            self.head = tuple(t.to(device) for t in self.head)
        return self

    def _scale(self, source_logits: torch.Tensor) -> float:
        if not self.adaptive_temperature:
            return self.temperature
        self._temperatures.append(adaptive_temperature(source_logits, self.train_logit_stats))
        return 1.0 / float(np.mean(self._temperatures))

    @torch.no_grad()
    def transform(self, source_logits: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
        """(W_B, b_B) for a test batch from the logits of f_theta0_bar on it ((gamma, beta, dW)
        for the additive variant), or None when DART-split's detector judges the shift not
        severe (s_B <= 0.5)."""
        scaled = source_logits * self._scale(source_logits)
        p_bar, d = batch_statistics(scaled)
        if self.detector is not None and torch.sigmoid(self.detector(d)) <= 0.5:
            return None
        return self.module(p_bar, d)

    def __call__(self, logits: torch.Tensor, source_logits: torch.Tensor, *,
                 features: torch.Tensor | None = None) -> torch.Tensor:
        """Refined logits of ``logits`` (from the model being adapted) for this batch; the
        additive variant refines that model's penultimate ``features`` instead."""
        params = self.transform(source_logits)
        if params is None:
            return logits
        return self.apply(logits, params, features=features)

    def apply(self, logits: torch.Tensor, params: tuple[torch.Tensor, ...], *,
              features: torch.Tensor | None = None) -> torch.Tensor:
        """Algorithm 2's refined logits, softmax argument (f(x) / T) W_B + b_B, of ``logits`` with
        this batch's ``params`` from :meth:`transform` (the additive variant refines the penultimate
        ``features`` with them)."""
        if self.config.outputs == "additive":
            if features is None or self.head is None:
                raise ValueError("the additive-parameter variant refines penultimate features: pass features= "
                                 "(and build the refiner with the source model's head)")
            return additive_refine(features, self.head, params) * self.current_scale()
        return refine(logits * self.current_scale(), *params)

    def current_scale(self) -> float:
        """The logit multiplier applied to the current batch (fixed, or 1 / the running mean of T)."""
        if not self.adaptive_temperature:
            return self.temperature
        return 1.0 / float(np.mean(self._temperatures))


def adaptive_temperature(source_logits: torch.Tensor, train_stats: dict | None) -> float:
    """T of Appendix B (Eq. smax_8) for one batch, from the mean max-logit and logit sum of the
    pre-trained classifier on training data (``train_stats``) and on the batch."""
    if train_stats is None:
        raise ValueError("adaptive temperature needs train_logit_stats (mean max logit and mean logit sum)")
    k = source_logits.shape[1]
    ratio = (1.0 + train_stats["max"]) / (k + train_stats["sum"])
    te_max = float(source_logits.max(1).values.mean())
    te_sum = float(source_logits.sum(1).mean())
    return (te_max - te_sum * ratio) / (k * ratio - 1.0)


def config_dict(config: DartConfig) -> dict:
    """The config's fields, without those of :data:`LATER_FIELDS` that hold their default."""
    fields = asdict(config)
    for name, default in LATER_FIELDS.items():
        if fields[name] == default:
            del fields[name]
    return fields
