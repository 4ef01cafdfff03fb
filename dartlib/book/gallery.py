"""The gallery's figure registry (every committed figure with the part of the paper it reproduces,
a readable title and a caption) and the gallery page."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from dartlib.book.sources import BookSources
from dartlib.reporting.figures import SAVE_DPI, WIDTH

FULL_SIZE_DIR = "_images"  # where Sphinx puts the images a page shows, under their own names


@dataclass(frozen=True)
class GalleryFigure:
    """One figure of the gallery: its file (figures/<profile>/<stem>.png), the part of the paper it
    reproduces (``label``, empty for the suite's own figures), a readable title and a caption that
    names only what the figure plots (tests/test_book.py checks the caption's terms against the
    figure's own text)."""

    stem: str
    label: str
    title: str
    caption: str


# In the paper's order: its figures by number, then the tables a figure draws, then the suite's
# own figures (data, source models, checks of the toy model, training curves).
GALLERY = (
    GalleryFigure("fig1_confusion", "Figure 1", "Confusion patterns of BNAdapt under label shift",
                  "BNAdapt's confusion matrices on the clean and corrupted test sets, long-tailed (top) and "
                  "inverse long-tailed (bottom); red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("fig3_accuracy_vs_rho", "Figure 3", "Accuracy against the imbalance ratio",
                  "Accuracy of NoAdapt, BNAdapt and BNAdapt+DART against the imbalance ratio rho (log scale), "
                  "mean over corruptions, ± 2 SE (an upper bound), beside the paper's Table 1 points (open diamonds)."),
    GalleryFigure("fig4_prediction_deviation", "Figure 4", "Batch accuracy against D(u, p_bar) and the prediction deviation",
                  "BNAdapt's accuracy per batch against D(u, p_bar) (left) and the prediction deviation d (right), "
                  "one colour per imbalance ratio (IR)."),
    GalleryFigure("data_dirichlet_simplex", "Figure 6", "Dirichlet sampling on the simplex",
                  "Class distributions of three-class batches on the simplex, i.i.d. against Dirichlet sampling, "
                  "with the long-tailed distributions of rho = 1, 2 and 10 marked."),
    GalleryFigure("data_dirichlet_batches", "Figure 7", "Five Dirichlet batches",
                  "Class distributions of five batches of the Dirichlet stream over the training set."),
    GalleryFigure("toy_illustration_and_curves", "Figure 8", "The four-class Gaussian toy model",
                  "The four-class Gaussian mixture after mean centring, with the Bayes decision boundaries "
                  "(left), and the probability that class 1 is predicted as class j against its prior p (right)."),
    GalleryFigure("confusion_lt_rho1", "Figure 9", "Confusion matrices, CIFAR-10C-LT, rho = 1",
                  "BNAdapt's confusion matrices on the clean set and every corruption, long-tailed rho = 1; "
                  "red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("confusion_lt_rho10", "Figure 10", "Confusion matrices, CIFAR-10C-LT, rho = 10",
                  "BNAdapt's confusion matrices on the clean set and every corruption, long-tailed rho = 10; "
                  "red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("confusion_lt_rho100", "Figure 11", "Confusion matrices, CIFAR-10C-LT, rho = 100",
                  "BNAdapt's confusion matrices on the clean set and every corruption, long-tailed rho = 100; "
                  "red boxes mark off-diagonal rates above 11%."),
    GalleryFigure("dart_w_b_gaussian_noise", "Figures 12 to 14", "The W and b that g_phi outputs",
                  "The W and b that g_phi outputs on the long-tailed Gaussian-noise streams, one row per alpha "
                  "and one pair of panels per rho, on one colour scale."),
    GalleryFigure("dart_pseudo_label_distribution", "Figure 15", "Averaged pseudo-label distribution",
                  "The ground-truth class distribution beside the mean pseudo-label distribution of BNAdapt and "
                  "BNAdapt+DART, one panel per rho."),
    GalleryFigure("hoc_tsne", "Figure 16 (a)", "t-SNE of the BN-adapted features",
                  "t-SNE maps of the BN-adapted features of one long-tailed stream, coloured by the true class "
                  "(left) and by BNAdapt's prediction (right)."),
    GalleryFigure("hoc_transition", "Figure 16 (b)", "Transition matrix estimated by HOC",
                  "The true transition matrix T (BNAdapt's confusion) beside the one HOC estimates."),
    GalleryFigure("table1_dart_gain", "Table 1", "DART's gain per method and rho",
                  "DART's gain (points, ± 2 SE) for each method and rho, ours beside the paper's."),
    GalleryFigure("table1_rho1_gain_vs_accuracy", "Tables 1, 19", "DART's effect at rho = 1 against accuracy",
                  "DART's gain at rho = 1 on each corruption against BNAdapt's accuracy, ours beside the paper's."),
    GalleryFigure("online_imbalance", "Table 2", "Online imbalance",
                  "Accuracy of NoAdapt, BNAdapt, BNAdapt+DART and BNAdapt+DART-split against the imbalance "
                  "ratio (IR) of the online-imbalance streams."),
    GalleryFigure("ablations_gain", "Tables 3 to 5", "Ablations of g_phi",
                  "The gain of each DART variant (g_phi's inputs, sampling and outputs) over BNAdapt, per stream."),
    GalleryFigure("sensitivity", "Tables 10, 13", "Sensitivity to alpha and to the test batch size",
                  "BNAdapt+DART's accuracy against alpha (symmetric log scale, alpha 0 left of 0.01), one curve per "
                  "rho, dotted: BNAdapt (left); each method's accuracy against the test batch size on balanced "
                  "streams (right); ± 2 SE."),
    GalleryFigure("more_settings", "Tables 12, 16", "CIFAR-10C-imb and mixed domains",
                  "Accuracy on the CIFAR-10C-imb protocol against the imbalance ratio (left) and on mixed domains "
                  "(right), with and without DART."),
    GalleryFigure("data_corruptions_cifar10", "", "The corruptions on CIFAR-10",
                  "The 15 corruptions (rows) at severities 1 to 5 (columns) on one CIFAR-10 test image, beside the "
                  "clean image."),
    GalleryFigure("data_corruptions_fmnist", "", "The corruptions on Fashion-MNIST",
                  "The 15 corruptions (rows) at severities 1 to 5 (columns) on one Fashion-MNIST test image (the "
                  "smoke profile's stand-in for CIFAR-10-C), beside the clean image."),
    GalleryFigure("data_protocol_histograms", "", "Class histograms of the test protocols",
                  "Samples per class of each test protocol's stream (long-tailed, inverse long-tailed, online "
                  "imbalance)."),
    GalleryFigure("source_training_curves", "", "Source model training",
                  "The source model's training loss (left), and its training and clean test accuracy (right), per epoch."),
    GalleryFigure("source_noadapt_corruptions", "", "NoAdapt per corruption",
                  "NoAdapt's accuracy per corruption, ours beside the paper's NoAdapt row."),
    GalleryFigure("toy_confusion_analytic_vs_simulated", "", "The toy model's confusion: closed form and simulation",
                  "The toy model's confusion matrix in closed form beside its simulation."),
    GalleryFigure("toy_optimal_w", "", "The toy model's optimal W",
                  "The optimal refinement matrix W* for a uniform training prior and a long-tailed test prior (rho = 100)."),
    GalleryFigure("dart_training_curves", "", "g_phi's intermediate training",
                  "L_imb on Dirichlet batches and L_bal on i.i.d. batches per step of g_phi's training "
                  "(moving averages)."),
    GalleryFigure("backbone_study", "", "Backbone strength",
                  "DART's cost at rho = 1 (left) and its gain at IR 50 and 5000 (right) against BNAdapt's accuracy, "
                  "one point per backbone and severity."),
    GalleryFigure("diagnosis", "", "Diagnosis of DART's cost at rho = 1 and its margin over NoAdapt on CIFAR-10C-imb",
                  "Per variant of Table 1's g_phi (one factor changed at a time), BNAdapt+DART minus BNAdapt at "
                  "rho = 1 and BNAdapt+DART minus NoAdapt at IR 20, 50 and 5000, each ± 2 SE; the paper's values "
                  "as grey lines."),
)
GALLERY_ORDER = {f.stem: i for i, f in enumerate(GALLERY)}
# figure file -> its gallery heading and caption (every committed figure has one: tests/test_book.py)
FIGURE_CAPTIONS = {f.stem: f"{f.label + ': ' if f.label else ''}{f.title}. {f.caption}" for f in GALLERY}


def gallery_page(*, sources: BookSources) -> tuple[str, list[Path]]:
    """Every figure of the profile as an image with its caption; returns the page and the files
    it shows."""
    pngs = sorted(sources.figures.glob("*.png")) if sources.figures.is_dir() else []
    pngs.sort(key=lambda p: (GALLERY_ORDER.get(p.stem, len(GALLERY)), p.stem))
    known = {f.stem: f for f in GALLERY}
    lines = [f"# Gallery ({sources.profile} profile)", "",
             f"Every figure in `figures/{sources.profile}/` (PDF beside each PNG), in the paper's order: its figures "
             "by number, then the tables a figure draws, then the suite's own figures. Each is shown at the same "
             "scale, so its fonts read at the same size; click a figure for its full-size image. Profile: "
             f"{sources.profile}.", ""]
    if not pngs:
        lines.append(f"No figures in `figures/{sources.profile}/`: run `make reproduce PROFILE={sources.profile}`.")
    for png in pngs:
        entry = known.get(png.stem) or GalleryFigure(png.stem, "", png.stem.replace("_", " "), "")
        heading = f"{entry.label}: {entry.title}" if entry.label else entry.title
        width = shown_width_percent(png)
        # the image links to itself at full size (Sphinx copies every image to _images/ under its own name)
        lines += [f"## {heading}", "", f"```{{figure}} figures/{png.name}", f":alt: {heading}", f":width: {width}%",
                  f":target: {FULL_SIZE_DIR}/{png.name}", "", f"{entry.caption} ({sources.profile} profile; `figures/{sources.profile}/{png.stem}.pdf`)", "```",
                  ""]
    return "\n".join(lines), pngs


def shown_width_percent(png: Path) -> int:
    """The width at which the gallery shows ``png``, in percent of the text column: a figure of
    ``figures.WIDTH`` inches fills it, a narrower one is shown narrower, so that every figure's
    fonts appear at the same size."""
    width_px = struct.unpack(">I", png.read_bytes()[16:20])[0]
    return max(10, min(100, round(100 * width_px / (WIDTH * SAVE_DPI))))
