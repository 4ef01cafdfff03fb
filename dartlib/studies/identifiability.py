"""Identifiability of a batch's class from DART's inputs (the diagnosis's bound on any refiner).

g_phi sees a test batch only through the BN-adapted source model's averaged pseudo-label p_bar
and prediction deviation d (Section 3). On CIFAR-10C-imb at IR 5000 a test batch is (almost) one
class, and the best refinement predicts that class for the whole batch. Whether any g_phi with
these inputs can reach the paper's accuracy there is bounded by how well the batch's majority
class follows from (p_bar, d) at all. Here a plain multinomial logistic regression is fitted on
single-class batches of the labelled training data (what intermediate training could show g_phi)
and scored on the test batches; ``argmax p_bar`` is the rule that needs no training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from dartlib.dart.refiner import batch_statistics
from dartlib.data.augmentation import to_tensor
from dartlib.data.protocols import batches
from dartlib.experiments.engine import TestTimeContext
from dartlib.experiments.settings import Settings


def single_class_batches(labels: np.ndarray, *, batch_size: int, per_class: int, seed: int) -> list[np.ndarray]:
    """``per_class`` batches of ``batch_size`` indices of one class each, for every class (drawn
    without replacement within a class while it lasts)."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(int(labels.max()) + 1):
        pool = rng.permutation(np.flatnonzero(labels == c))
        need = per_class * batch_size
        pool = np.concatenate([pool] * (need // len(pool) + 1))[:need]
        out += [pool[i * batch_size:(i + 1) * batch_size] for i in range(per_class)]
    return out


@torch.no_grad()
def batch_features(forward: Callable[[torch.Tensor], torch.Tensor], images: np.ndarray,
                   index_batches: Sequence[np.ndarray]) -> np.ndarray:
    """Per batch, DART's inputs from ``forward`` (the BN-adapted source model): [log p_bar, d]."""
    rows = []
    for idx in index_batches:
        p_bar, d = batch_statistics(forward(to_tensor(images[idx])))
        rows.append(np.concatenate([np.log(p_bar.double().clamp_min(1e-12).numpy()), [float(d)]]))
    return np.asarray(rows)


def identifiability(*, forward: Callable[[torch.Tensor], torch.Tensor], train_images: np.ndarray,
                    train_labels: np.ndarray, streams: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                    batch_size: int, per_class: int = 20, seed: int = 0, majority: float = 0.9) -> pd.DataFrame:
    """How well the majority class of a test batch follows from (p_bar, d).

    A logistic regression (scikit-learn, standardised inputs) is fitted on ``per_class``
    single-class batches per class of the training images; ``streams`` maps a name (a
    corruption) to a test stream (images, labels, order), cut into batches of ``batch_size``
    as the engine cuts them. Only batches whose majority class holds at least ``majority`` of
    the batch are scored. Per stream: the number of such batches, the share of their majority
    class (the accuracy of a refinement that predicts that class for the whole batch), the
    accuracy of identifying that class by the fitted classifier and by argmax p_bar, and the
    accuracy of predicting the classifier's class for every image of the batch (what a refiner
    that could only identify the class would reach)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train_batches = single_class_batches(train_labels, batch_size=batch_size, per_class=per_class, seed=seed)
    x_train = batch_features(forward, train_images, train_batches)
    y_train = np.array([train_labels[idx[0]] for idx in train_batches])
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x_train, y_train)
    k = int(train_labels.max()) + 1
    rows = []
    for name, (images, labels, order) in streams.items():
        test_batches = [idx for idx in batches(order, batch_size=batch_size)]
        counts = np.array([np.bincount(labels[idx], minlength=k) for idx in test_batches])
        share = counts.max(1) / counts.sum(1)
        keep = share >= majority
        if not keep.any():
            rows.append({"stream": name, "batches": 0})
            continue
        x = batch_features(forward, images, [b for b, kept in zip(test_batches, keep) if kept])
        kept_counts = counts[keep]
        truth = kept_counts.argmax(1)
        guess = model.predict(x)
        whole = kept_counts[np.arange(len(guess)), guess] / kept_counts.sum(1)
        rows.append({"stream": name, "batches": int(keep.sum()), "majority_share": 100 * float(share[keep].mean()),
                     "classifier": 100 * float((guess == truth).mean()),
                     "argmax_pbar": 100 * float((x[:, :k].argmax(1) == truth).mean()),
                     "whole_batch_accuracy": 100 * float(whole.mean())})
    return pd.DataFrame(rows)


IDENTIFIABILITY_IR = 5000.0  # single-class test batches


def identifiability_cells(settings: Settings) -> list:
    """The BNAdapt cells whose streams :func:`identifiability_study` reads: CIFAR-10C-imb at IR 5000,
    one per corruption of ``online_corruptions``."""
    from dartlib.experiments.cell_options import options_text
    from dartlib.experiments.grid import Cell

    return [Cell(dataset=settings.test.corrupted_dataset, shift="online-imb", shift_param=IDENTIFIABILITY_IR,
                 corruption=corruption, severity=settings.test.severity, method="bnadapt",
                 params=options_text(subset=settings.test.imb_subset_size), seed=settings.seed)
            for corruption in settings.online.corruptions]


def identifiability_study(*, settings: Settings, context: TestTimeContext, per_class: int = 20) -> pd.DataFrame:
    """:func:`identifiability` on the profile's CIFAR-10C-imb
    streams at IR 5000 (seed 0, every corruption of ``online_corruptions``), with the BN-adapted
    source model's forwards read from ``context``'s shared memo (the grid's, so nothing is
    computed twice)."""
    from dartlib.data import load
    from dartlib.experiments.cell_streams import cell_stream

    forward = context.shared_source()
    streams = {cell.corruption: cell_stream(cell) for cell in identifiability_cells(settings)}
    train = load(settings.source.dataset, split="train")
    table = identifiability(forward=forward, train_images=train.images, train_labels=train.labels, streams=streams,
                            batch_size=context.batch_size, per_class=per_class, seed=settings.seed)
    context.save_shared_source()
    return table


# Changed when the study's code changes what it computes, so that its stored table goes stale.
IDENTIFIABILITY_REVISION = 1


def identifiability_inputs(*, settings: Settings, per_class: int) -> str:
    """The digest of what :func:`identifiability_study` reads: the source model's file, the test
    streams, the test batch size, ``per_class`` and the study's revision."""
    from dartlib.experiments.cell_streams import stream_digest
    from dartlib.experiments.keyed_tables import inputs_digest
    from dartlib.models.artefacts import sha256_of

    return inputs_digest(f"identifiability@{IDENTIFIABILITY_REVISION}", sha256_of(settings.checkpoint()),
                         settings.source.dataset, settings.test.batch_size, per_class, settings.seed,
                         *(stream_digest(cell) for cell in identifiability_cells(settings)))


def identifiability_results(*, profile: str, compute: bool, per_class: int = 20) -> pd.DataFrame:
    """``results/<profile>/identifiability.csv``: with ``compute``, computed
    (:func:`identifiability_study` with notebook 15's context, whose BN-adapted forwards it shares)
    unless it is current (:func:`dartlib.experiments.keyed_tables.keyed_table`), else read; an
    empty table where it has not been computed (the notebook says so: NOT RUN)."""
    from dartlib.experiments.keyed_tables import keyed_table
    from dartlib.paths import results_dir
    from dartlib.studies.diagnosis import prepare_diagnosis_context, train_diagnosis_inputs

    path = results_dir(profile) / "identifiability.csv"
    if not compute:
        return pd.read_csv(path) if path.is_file() else pd.DataFrame()
    settings = Settings.from_profile(profile)

    def compute_table() -> pd.DataFrame:
        train_diagnosis_inputs(settings=settings)
        context, _ = prepare_diagnosis_context(settings=settings)
        return identifiability_study(settings=settings, context=context, per_class=per_class)

    return keyed_table(path, inputs=identifiability_inputs(settings=settings, per_class=per_class),
                       compute=compute_table)
