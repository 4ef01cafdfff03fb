"""Appendix E's analysis: HOC (Zhu et al., 2021) run on the BN-adapted features of
one long-tailed stream, its transition matrix T beside the true one (the BNAdapt confusion matrix)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from dartlib.analysis.hoc import hoc_estimate, nearest_neighbours, transition_matrix
from dartlib.studies.ablations import bnadapt_streams
from dartlib.experiments.settings import Settings
from dartlib.experiments.source_setup import prepare_source
from dartlib.paths import results_dir


@dataclass(frozen=True)
class FeatureStream:
    """f_theta0_bar's features, its predictions and the true labels over one stream, K classes."""

    features: torch.Tensor
    predicted: np.ndarray
    true: np.ndarray
    k: int

    def describe(self, settings: Settings) -> str:
        """The stream and BNAdapt's accuracy on it."""
        s = settings
        return (f"profile={s.profile}: {s['source_arch']}, {s['corrupted_dataset']}/{s['hoc_corruption']} LT "
                f"rho={s['hoc_rho']:g}: {len(self.true)} images, "
                f"BNAdapt accuracy {100 * (self.predicted == self.true).mean():.1f}%")


def bnadapt_feature_stream(settings: Settings) -> FeatureStream:
    """The BN-adapted source model on the ``hoc_corruption`` stream under LT ``hoc_rho``."""
    setup = prepare_source(settings=settings, with_train=False)
    (stream,) = bnadapt_streams(setup.model, dataset=settings["corrupted_dataset"],
                                corruptions=[settings["hoc_corruption"]], shifts={"lt": [settings["hoc_rho"]]},
                                severity=settings["severity"], seed=settings["seed"],
                                batch_size=settings["test_batch_size"])
    logits = torch.cat(stream.logits)
    return FeatureStream(features=torch.cat(stream.features), predicted=logits.argmax(1).numpy(), true=stream.labels,
                         k=int(logits.shape[1]))


def hoc_versus_true(*, stream: FeatureStream, settings: Settings) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """How often a sample's nearest neighbour (cosine similarity) shares its true class and its
    prediction, and how far HOC's T and the true T are from the identity (over the classes present),
    written to ``results/<profile>/hoc.csv``; returns that summary, the true T and HOC's T."""
    true, predicted, k = stream.true, stream.predicted, stream.k
    nn = nearest_neighbours(stream.features, k=1)[:, 0].numpy()
    t_true = transition_matrix(true, predicted, k)
    t_hoc, _ = hoc_estimate(stream.features, predicted, k, steps=settings["hoc_steps"], seed=settings["seed"])
    present = np.bincount(true, minlength=k) > 0
    summary = pd.DataFrame({
        "nearest neighbour shares the true class (%)": [100 * (true[nn] == true).mean()],
        "nearest neighbour shares the prediction (%)": [100 * (predicted[nn] == predicted).mean()],
        "mean diagonal, true T": [t_true.diagonal()[present].mean()],
        "mean diagonal, HOC's T": [t_hoc.diagonal()[present].mean()],
        "max |T - I|, true T": [np.abs(t_true - np.eye(k))[present].max()],
        "max |T - I|, HOC's T": [np.abs(t_hoc - np.eye(k))[present].max()],
    }).T.rename(columns={0: "value"})
    summary.to_csv(results_dir(settings.profile) / "hoc.csv", float_format="%.4f")
    return summary, t_true, t_hoc
