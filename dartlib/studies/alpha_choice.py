"""Choosing alpha, the weight of the identity regulariser L_bal (Eq. 3), for a backbone the paper
does not cover, from held-out labelled data only, never from test data.

A small, over-confident source model can make the paper's alpha = 0.1 too weak: g_phi then bends
the predictions of balanced batches and costs accuracy at rho = 1. The check holds out a
class-balanced part of the training set (or takes validation images), trains g_phi on the rest for
each candidate alpha, and on held-out streams (i.i.d., and long-tailed at larger rho) compares
BNAdapt with BNAdapt+DART and measures how far W_B is from I and b_B from 0.

Two rules, each fixed before any result:

- for a model of your own (:func:`select_alpha`): each candidate's score weighs DART's gain without
  label shift (rho = 1) against its gain under shift (the long-tailed streams), (1 - w) x the first
  + w x the second, each with its SE from the suite's noise model (:mod:`dartlib.analysis.noise`);
  the kept alpha stays unless the best-scoring candidate beats it by more than 2 SE of their paired
  difference; the result says when the held-out data cannot separate candidates and when DART does
  not help the model;
- for a profile's backbone (:func:`validate_alpha`, :func:`choose_alpha`): keep the paper's alpha
  unless BNAdapt+DART loses more than ``max_loss`` points to BNAdapt on the held-out i.i.d. stream;
  otherwise take the smallest candidate that loses at most that much (the one that loses least
  when none does).

Clean held-out images cannot show what a corruption does to the backbone's batch statistics, and
the loss at rho = 1 grows where the backbone is weak. With ``holdout_corruptions`` (CIFAR-10-C's
extra corruptions, which no test set here uses) every held-out stream is also scored corrupted,
and the rule then reads the i.i.d. loss averaged over those corrupted streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from dartlib.dart.refiner import DartConfig, Refiner
from dartlib.data.corruptions import corrupt
from dartlib.data.protocols import TEST_BATCH_SIZE, class_balanced, long_tailed
from dartlib.data.dataset import Dataset
from dartlib.experiments.settings import Settings
from dartlib.models.evaluation import evaluated_on, logits_accuracy, stream_logits
from dartlib.models.backbones import frozen_bn_adapted


def holdout_split(labels: np.ndarray, *, per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, held-out) indices: ``per_class`` random images of every class held out, the rest fit."""
    held = class_balanced(labels, per_class=per_class, seed=seed)
    keep = np.ones(len(labels), dtype=bool)
    keep[held] = False
    return np.flatnonzero(keep), np.sort(held)


def _subset(data: Dataset, idx: np.ndarray, split: str) -> Dataset:
    """Part of ``data`` as the same kind of Dataset (a user's grey images stay grey)."""
    return replace(data, split=split, images=data.images[idx], labels=data.labels[idx], info=dict(data.info))


@torch.no_grad()
def heldout_rows(model: nn.Module, refiner: Refiner, held: Dataset, *, rhos=(1, 10, 100), batch_size: int = TEST_BATCH_SIZE,
                 seed: int = 0, device: str | None = None) -> list[dict]:
    """For each rho: BNAdapt and BNAdapt+DART accuracy on the held-out long-tailed stream (rho = 1:
    every held-out image, shuffled), and the mean ||W_B - I||_F and ||b_B||_2 over its batches.
    ``device``: where the streams are evaluated (default: the machine's)."""
    frozen, device = evaluated_on(frozen_bn_adapted(model), device)  # one device copy for every rho
    eye = torch.eye(held.num_classes)
    rows = []
    for rho in rhos:
        order = long_tailed(held.labels, rho=float(rho), seed=seed)
        logits = stream_logits(frozen, held.images, order, batch_size=batch_size, device=device)
        refiner.reset()
        dart = logits_accuracy(logits, held.labels, order, batch_size=batch_size, refiner=refiner)
        refiner.reset()
        w_dev, b_dev = [], []
        for batch in logits:
            wb = refiner.transform(batch)
            w, b = wb if wb is not None else (eye, torch.zeros(held.num_classes))
            w_dev.append(float(torch.linalg.matrix_norm(w - eye)))
            b_dev.append(float(torch.linalg.vector_norm(b)))
        rows.append({"rho": float(rho), "n": len(order),
                     "bnadapt": logits_accuracy(logits, held.labels, order, batch_size=batch_size), "dart": dart,
                     "w_minus_i": float(np.mean(w_dev)), "b_norm": float(np.mean(b_dev))})
    return rows


def corrupted_heldout(held: Dataset, *, corruption: str, severity: int, seed: int) -> Dataset:
    """The held-out images under one (held-out) corruption, labels unchanged."""
    images = corrupt(held.images, corruption=corruption, severity=severity, seed=seed)
    return Dataset(held.name, f"{held.split}-{corruption}", images, held.labels, held.classes, dict(held.info))


def choose_alpha(frame: pd.DataFrame, *, paper_alpha: float, max_loss: float = 0.5) -> float:
    """The rule of the module docstring, on :func:`validate_alpha`'s table (its i.i.d. loss is
    averaged over the corrupted streams where the table has any)."""
    iid = frame[frame.rho == 1.0]
    if "corruption" in iid and (iid.corruption != "clean").any():
        iid = iid[iid.corruption != "clean"]
    iid = iid.groupby("alpha")[["bnadapt", "dart"]].mean()
    loss = (iid["bnadapt"] - iid["dart"]).sort_index()
    if loss.get(paper_alpha, np.inf) <= max_loss:
        return paper_alpha
    within = loss[loss <= max_loss]
    return float(within.index[0]) if len(within) else float(loss.idxmin())


# The candidates :func:`select_alpha` tries by default: the paper's 0.1 and stronger identity
# regularisers, a factor of about 3 apart.
DEFAULT_ALPHAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


@dataclass(frozen=True)
class AlphaSearch:
    """What the rule of this module searches and how it scores: the candidate ``alphas``,
    ``heldout_per_class`` training images of every class held out (None: a fifth of the smallest
    class, at most 500), the held-out streams' ``rhos`` (1, the i.i.d. stream the rule reads, among
    them) in test batches of ``batch_size``; ``shift_weight``, the weight of the gain under label
    shift against the gain without it in :func:`select_alpha`'s score; and ``max_loss``, the accuracy
    points BNAdapt+DART may lose to BNAdapt on the i.i.d. stream before :func:`choose_alpha` (a
    profile's backbone, :func:`validate_alpha`) leaves the kept alpha."""

    alphas: Sequence[float] = DEFAULT_ALPHAS
    heldout_per_class: int | None = None
    rhos: Sequence[float] = (1, 10, 100)
    batch_size: int = TEST_BATCH_SIZE
    max_loss: float = 0.5
    shift_weight: float = 0.5

    def heldout(self, labels: np.ndarray, *, num_classes: int) -> int:
        """Images held out per class: ``heldout_per_class``, or a fifth of the smallest class (at most 500)."""
        smallest = int(np.bincount(labels, minlength=num_classes).min())
        return min(500, smallest // 5) if self.heldout_per_class is None else self.heldout_per_class


def validate_alpha(
    *, checkpoint: Path, model: nn.Module, train: Dataset, config: DartConfig, search: AlphaSearch = AlphaSearch(),
    holdout_corruptions=(), severity: int = 5, device: str | None = None, progress: bool = True,
) -> tuple[pd.DataFrame, float]:
    """Train g_phi (``config`` with each alpha of ``search``) on the fit part of ``train`` and
    score it on the held-out part (:class:`AlphaSearch`), clean and under each of ``holdout_corruptions`` at
    ``severity``; returns the table (one row per alpha, corruption and rho) and the alpha
    :func:`choose_alpha` picks, with ``config.alpha`` as the value kept unless it loses too much
    (the paper's, or the profile's). The refiners are saved beside ``checkpoint``, tagged with
    the held-out split, and reused."""
    from dartlib.dart.intermediate import load_or_train_refiners

    alphas, held_n = search.alphas, search.heldout(train.labels, num_classes=len(train.classes))
    fit_idx, held_idx = holdout_split(train.labels, per_class=held_n, seed=config.seed)
    fit, held = _subset(train, fit_idx, "train-fit"), _subset(train, held_idx, "train-heldout")
    streams = {"clean": held, **{c: corrupted_heldout(held, corruption=c, severity=severity, seed=config.seed)
                                 for c in holdout_corruptions}}
    # the candidates differ only in alpha, so those not saved yet train together in one pass
    trained = load_or_train_refiners(checkpoint, model, fit, [replace(config, alpha=float(a)) for a in alphas],
                                     device=device, progress=progress, tag=f"fit-heldout{held_n}")
    rows = []
    for alpha, (refiner, _) in zip(alphas, trained):
        for name, data in streams.items():
            rows += [{"alpha": float(alpha), "corruption": name, **row}
                     for row in heldout_rows(model, refiner, data, rhos=search.rhos, batch_size=search.batch_size,
                                             seed=config.seed)]
    frame = pd.DataFrame(rows)
    frame["gain"] = frame["dart"] - frame["bnadapt"]
    return frame, choose_alpha(frame, paper_alpha=config.alpha, max_loss=search.max_loss)


@dataclass(frozen=True)
class ProfileValidation:
    """What :func:`validate_profile_alpha` found: the table, the chosen alpha, the g_phi
    configuration the candidates varied and the source model's metadata."""

    frame: pd.DataFrame
    chosen: float
    config: DartConfig
    meta: dict


def validate_profile_alpha(*, settings: Settings, paper_alpha: float, search: AlphaSearch, epochs: int, path: Path,
                           holdout_corruptions: Sequence[str] = ()) -> ProfileValidation:
    """:func:`validate_alpha` for a profile's backbone (``settings``, its checked values): its source
    model trained (or found), g_phi of ``epochs`` epochs at the profile's settings with the paper's
    alpha as the one kept (the rule keeps the paper's alpha unless it costs too much, not the
    profile's current one), the held-out images at the profile's severity; the table is written to
    ``path``."""
    from dartlib.data.files import atomic_path
    from dartlib.data.sources import load
    from dartlib.models.checkpoints import load_checkpoint
    from dartlib.models.training import train_source

    checkpoint = train_source(dataset=settings.source.dataset, arch=settings.source.arch,
                              recipe=settings.source.recipe, seed=settings.seed, progress=False)
    model, meta = load_checkpoint(checkpoint)
    config = settings.dart_config(alpha=paper_alpha, epochs=epochs)
    frame, chosen = validate_alpha(checkpoint=checkpoint, model=model, train=load(settings.source.dataset, split="train"),
                                   config=config, search=search, holdout_corruptions=holdout_corruptions,
                                   severity=settings.test.severity)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.4f")
    return ProfileValidation(frame=frame, chosen=chosen, config=config, meta=meta)


# How many SEs apart two numbers must be before the advice treats them as different.
SEPARATION = 2.0


@dataclass
class AlphaChoice:
    """What :func:`select_alpha` returns.

    ``alpha``: the candidate the rule picks; ``kept``: the value kept unless another candidate
    scores clearly better (``config.alpha``, the paper's 0.1 by default); ``shift_weight``: the
    weight w of the gain under shift in the score. ``table``: one row per candidate and held-out
    stream (``rho``; ``n`` images, ``bnadapt`` and ``dart`` accuracy in %, ``gain`` = dart -
    bnadapt and its paired SE ``gain_se``, mean ||W_B - I||_F ``w_minus_i`` and ||b_B||_2
    ``b_norm``). ``summary``: one row per candidate: the gain without shift (``iid``, rho = 1) and
    under shift (``shifted``, the mean over the label-shifted streams), the score (1 - w) iid + w
    shifted, each with its SE (``*_se``), and the score's difference from the chosen candidate's
    with the SE of that paired difference (``behind``, ``behind_se``). ``separable``: whether every
    other candidate scores more than 2 SE below the choice; ``helps``: whether some candidate's gain
    under shift is more than 2 SE above 0. SEs: the suite's noise model
    (:mod:`dartlib.analysis.noise`: paired, clustered by held-out image)."""

    alpha: float
    kept: float
    shift_weight: float
    table: pd.DataFrame
    summary: pd.DataFrame
    separable: bool
    helps: bool

    def gains(self) -> pd.DataFrame:
        """DART's gain (points) on the held-out streams: rows alpha, columns rho."""
        return self.table.pivot_table(index="alpha", columns="rho", values="gain")

    def report(self) -> str:
        """The per-candidate table: gains and score with their SEs, in points."""
        rows = []
        for alpha, r in self.summary.iterrows():
            mark = " <- chosen" if alpha == self.alpha else (" (kept unless beaten)" if alpha == self.kept else "")
            rows.append(f"{alpha:>7g}  {r.iid:+6.2f} ± {r.iid_se:4.2f}  {r.shifted:+6.2f} ± {r.shifted_se:4.2f}  "
                        f"{r.score:+6.2f} ± {r.score_se:4.2f}  {r.behind:+6.2f} ± {r.behind_se:4.2f}{mark}")
        head = ("  alpha  gain, no shift    gain, shifted     score            vs chosen\n"
                f"(DART - BNAdapt in points on held-out batches; score = {1 - self.shift_weight:g} x no shift + "
                f"{self.shift_weight:g} x shifted; ± one SE)")
        return "\n".join([head, *rows])

    def __str__(self) -> str:
        r = self.summary.loc[self.alpha]
        why = (f"alpha = {self.alpha:g}: DART's gain over BNAdapt on held-out batches {r.iid:+.2f} ± {r.iid_se:.2f} "
               f"points without label shift and {r.shifted:+.2f} ± {r.shifted_se:.2f} under it (score "
               f"{r.score:+.2f} ± {r.score_se:.2f})")
        kept = self.summary.loc[self.kept]
        if self.alpha == self.kept:
            why += f"; the kept {self.kept:g} is not beaten by more than {SEPARATION:g} SE"
        else:
            why += (f"; it beats the kept {self.kept:g} by {-kept.behind:.2f} ± {kept.behind_se:.2f} points of score, "
                    f"more than {SEPARATION:g} SE")
        lines = [why + "."]
        close = [a for a, row in self.summary.iterrows() if a != self.alpha and -row.behind <= SEPARATION * row.behind_se]
        if close:
            lines.append(f"The held-out data cannot separate it from alpha = {', '.join(f'{a:g}' for a in close)} "
                         f"(score differences within {SEPARATION:g} SE): any of these is as well supported.")
        if not self.helps:
            lines.append(f"DART does not help this model on the held-out data: no candidate's gain under label shift "
                         f"is more than {SEPARATION:g} SE above 0; use the method alone (refiner=None), or check "
                         "with more held-out images (validation= images the model was not trained on).")
        elif r.shifted <= SEPARATION * r.shifted_se:
            lines.append(f"Its own gain under shift is within {SEPARATION:g} SE of 0.")
        if r.iid < -SEPARATION * r.iid_se:
            lines.append(f"It costs {-r.iid:.2f} ± {r.iid_se:.2f} points on batches without label shift.")
        return "\n".join(lines)


def scored_candidates(table: pd.DataFrame, outcomes: dict, *, kept: float, shift_weight: float) -> tuple[pd.DataFrame, float]:
    """The summary of :class:`AlphaChoice` and the alpha the rule of :func:`select_alpha` picks, from
    the held-out ``table`` and each stream's per-image ``outcomes`` ((method, alpha, rho) ->
    :class:`dartlib.experiments.outcomes.CellOutcomes`; method ``bnadapt`` has alpha None)."""
    from dartlib.analysis.noise import combination

    iid_rho, shifted_rhos = 1.0, sorted({float(r) for r in table.rho} - {1.0})
    if not shifted_rhos:
        raise ValueError("the held-out table has no label-shifted stream (rho > 1): the rule weighs the gain under shift")
    w = float(shift_weight)

    def rows(method: str, alpha: float | None, rho: float) -> pd.DataFrame:
        o = outcomes[(method, alpha, rho)]
        key = f"{method}-{alpha}-{rho:g}"
        return pd.DataFrame([{"dataset": "heldout", "shift": "lt", "shift_param": rho, "corruption": "clean",
                              "severity": "", "method": method, "refiner": "" if alpha is None else f"alpha={alpha:g}",
                              "params": "", "seed": 0, "accuracy": o.accuracy, "n": o.n, "key": key, "inputs": ""}])

    store = {(f"{m}-{a}-{rho:g}", ""): o for (m, a, rho), o in outcomes.items()}  # as noise.combination reads them

    def score_terms(alpha: float, sign: float = 1.0) -> list:
        terms = [(sign * (1 - w), rows("dart", alpha, iid_rho))]
        terms += [(sign * w / len(shifted_rhos), rows("dart", alpha, rho)) for rho in shifted_rhos]
        return terms

    def bn_terms(sign: float = 1.0) -> list:
        terms = [(-sign * (1 - w), rows("bnadapt", None, iid_rho))]
        return terms + [(-sign * w / len(shifted_rhos), rows("bnadapt", None, rho)) for rho in shifted_rhos]

    alphas = sorted({float(a) for a in table.alpha})
    summary = {}
    for a in alphas:
        iid = combination(terms=[(1.0, rows("dart", a, iid_rho)), (-1.0, rows("bnadapt", None, iid_rho))], outcomes=store)
        shifted = combination(terms=[(k / len(shifted_rhos), rows(m, aa, rho)) for rho in shifted_rhos
                                     for k, m, aa in ((1.0, "dart", a), (-1.0, "bnadapt", None))], outcomes=store)
        score = combination(terms=score_terms(a) + bn_terms(), outcomes=store)
        summary[a] = {"iid": iid.value, "iid_se": iid.se, "shifted": shifted.value, "shifted_se": shifted.se,
                      "score": score.value, "score_se": score.se}
    frame = pd.DataFrame.from_dict(summary, orient="index").rename_axis("alpha")
    best = float(frame.score.idxmax())

    def behind(a: float, than: float) -> tuple[float, float]:
        if a == than:
            return 0.0, 0.0
        d = combination(terms=score_terms(a) + score_terms(than, -1.0), outcomes=store)
        return d.value, d.se

    # keep the kept value unless the best candidate beats it by more than SEPARATION SE
    lead, lead_se = behind(best, kept)
    chosen = best if lead > SEPARATION * lead_se else float(kept)
    diffs = [behind(a, chosen) for a in frame.index]
    frame["behind"], frame["behind_se"] = [d for d, _ in diffs], [e for _, e in diffs]
    return frame, chosen


@torch.no_grad()
def heldout_outcomes(model: nn.Module, refiners: dict[float, Refiner], held: Dataset, *, rhos, batch_size: int,
                     seed: int, device: str | None = None) -> tuple[pd.DataFrame, dict]:
    """For each rho, the held-out stream (rho = 1: every held-out image, shuffled; else long-tailed)
    scored by BNAdapt and by BNAdapt+DART with each refiner (alpha -> refiner), from one pass of
    the frozen BN-adapted model: the table of :class:`AlphaChoice` and the per-image outcomes
    :func:`scored_candidates` reads."""
    from dartlib.data.protocols import batches
    from dartlib.experiments.outcomes import CellOutcomes

    frozen, device = evaluated_on(frozen_bn_adapted(model), device)
    eye = torch.eye(held.num_classes)
    rows, outcomes = [], {}

    def outcome(logits: list[torch.Tensor], order: np.ndarray) -> CellOutcomes:
        correct = np.concatenate([batch.argmax(1).numpy() == held.labels[idx]
                                  for batch, idx in zip(logits, batches(order, batch_size=batch_size))])
        return CellOutcomes.from_stream(order=order, correct=correct, size=len(held))

    for rho in map(float, rhos):
        order = np.random.default_rng(seed).permutation(len(held)) if rho == 1 else \
            long_tailed(held.labels, rho=rho, seed=seed)
        logits = stream_logits(frozen, held.images, order, batch_size=batch_size, device=device)
        outcomes[("bnadapt", None, rho)] = bn = outcome(logits, order)
        for alpha, refiner in refiners.items():
            refiner.reset()
            refined, w_dev, b_dev = [], [], []
            for batch in logits:
                refined.append(refiner(batch, batch))
                wb = refiner.transform(batch)
                w, b = wb if wb is not None else (eye, torch.zeros(held.num_classes))
                w_dev.append(float(torch.linalg.matrix_norm(w - eye)))
                b_dev.append(float(torch.linalg.vector_norm(b)))
            outcomes[("dart", alpha, rho)] = dart = outcome(refined, order)
            paired = (dart.correct - bn.correct)[dart.members > 0].astype(float) * 100.0
            rows.append({"alpha": alpha, "rho": rho, "n": len(order), "bnadapt": bn.accuracy, "dart": dart.accuracy,
                         "gain": dart.accuracy - bn.accuracy,
                         "gain_se": float(paired.std(ddof=1) / np.sqrt(len(paired))) if len(paired) > 1 else np.nan,
                         "w_minus_i": float(np.mean(w_dev)), "b_norm": float(np.mean(b_dev))})
    return pd.DataFrame(rows), outcomes


def select_alpha(
    *, model: nn.Module, data, num_classes: int, device: str, config: DartConfig | None = None,
    search: AlphaSearch = AlphaSearch(), validation=None, cache_dir: Path | str | None = None,
    progress: bool = True,
) -> AlphaChoice:
    """Choose alpha, the weight of L_bal (Eq. 3), for your own classifier from labelled data
    alone (no test labels).

    For every candidate of ``search.alphas`` (and ``config.alpha``) g_phi is trained (in one pass,
    Algorithm 1, with ``config``'s other settings: validate with the epochs you will deploy) and
    DART's gain over BNAdapt is measured on held-out batches: i.i.d. (rho = 1: the cost where there
    is no label shift) and long-tailed at the other ``search.rhos`` (10 and 100: the gain under label
    shift), each with its SE (the suite's noise model, :mod:`dartlib.analysis.noise`: paired image by
    image, clustered by held-out image). The held-out images are ``validation`` when given (labelled
    images the model was not trained on; g_phi is then trained on all of ``data``), else
    ``search.heldout_per_class`` images of every class of ``data`` (g_phi trained on the rest).

    The rule, fixed before any result: each candidate's score is (1 - w) x its gain without shift
    + w x its mean gain under shift, w = ``search.shift_weight`` (0.5: shift and no shift weigh
    alike); keep ``config.alpha`` (the paper's 0.1 by default) unless the best-scoring candidate beats
    it by more than 2 SE of their paired difference, and then take that one. The result also says,
    in words, when the held-out data cannot separate the choice from other candidates (score
    differences within 2 SE) and when DART does not help the model (no candidate's gain under shift
    more than 2 SE above 0).

    ``model``, ``data``, ``num_classes``, ``device``, ``config``, ``cache_dir``: as
    :func:`dartlib.dart.fit.fit_refiner` takes them (any ``nn.Module`` with BatchNorm layers
    returning logits for float N x C x H x W in [0, 1], grey or RGB, any H x W). The refiners are
    cached as :func:`fit_refiner` caches its own. Raises :class:`dartlib.dart.fit.SettingError`
    naming the fix for data, a model or a setting that cannot work."""
    from dartlib.dart.fit import (
        SettingError, cache_key, check_device, check_every_class, check_model, check_supported, default_cache_dir,
        labelled_images,
    )
    from dartlib.dart.intermediate import load_or_train_refiners
    from dartlib.dart.refiner_probe import model_probe

    config = DartConfig() if config is None else config
    device = check_device(device)
    alphas = sorted({float(a) for a in search.alphas} | {float(config.alpha)})
    if any(a < 0 for a in alphas):
        raise SettingError(f"alphas {alphas}: the weight of L_bal is >= 0")
    rhos = {float(r) for r in search.rhos}
    if 1.0 not in rhos or len(rhos) < 2 or min(rhos) < 1:
        raise SettingError(f"rhos={list(search.rhos)}: the rule weighs the i.i.d. stream (rho 1) against label-shifted "
                           "ones, so give 1 and at least one rho > 1 (default 1, 10, 100)")
    if not 0 <= search.shift_weight <= 1:
        raise SettingError(f"shift_weight={search.shift_weight}: the weight of the gain under shift lies in [0, 1]")
    train = labelled_images(data, num_classes=num_classes, every_class=False)
    check_model(model, train, num_classes=num_classes, device=device, config=config)
    check_every_class(train.labels, num_classes=num_classes)
    if validation is not None:
        fit, held, tag = train, labelled_images(validation, num_classes=num_classes), "fit-all"
        if held.images.shape[1:] != train.images.shape[1:]:
            raise SettingError(f"validation images are {held.images.shape[1:]} (H x W x C) but the training images "
                               f"{train.images.shape[1:]}: give both in one layout")
    else:
        smallest = int(np.bincount(train.labels, minlength=num_classes).min())
        held_n = search.heldout(train.labels, num_classes=num_classes)
        if not 1 <= held_n < smallest:
            raise SettingError(f"heldout_per_class={held_n}: hold out at least 1 and fewer than the smallest class's "
                               f"{smallest} images (default: a fifth of it)")
        fit_idx, held_idx = holdout_split(train.labels, per_class=held_n, seed=config.seed)
        fit, held = _subset(train, fit_idx, "train-fit"), _subset(train, held_idx, "train-heldout")
        tag = f"fit-heldout{held_n}"
    check_supported(fit.labels, config, num_classes=num_classes)
    folder = Path(default_cache_dir() if cache_dir is None else cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    anchor = folder / f"refiner-{cache_key(model, train)}.pt"
    trained = load_or_train_refiners(anchor, model, fit, [replace(config, alpha=a) for a in alphas], device=device,
                                     progress=progress, tag=tag, probe=model_probe(model, fit, device=device))
    table, outcomes = heldout_outcomes(model, {a: refiner for a, (refiner, _) in zip(alphas, trained)}, held,
                                       rhos=sorted(rhos), batch_size=search.batch_size, seed=config.seed, device=device)
    summary, chosen = scored_candidates(table, outcomes, kept=float(config.alpha), shift_weight=search.shift_weight)
    helps = bool((summary.shifted > SEPARATION * summary.shifted_se).any())
    others = summary.drop(index=chosen)
    separable = bool((-others.behind > SEPARATION * others.behind_se).all())
    return AlphaChoice(alpha=chosen, kept=float(config.alpha), shift_weight=float(search.shift_weight), table=table,
                       summary=summary, separable=separable, helps=helps)
