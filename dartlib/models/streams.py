"""A test stream and the one loop that runs a predictor over it, batch by batch, in order.

Every evaluation of the suite walks its stream through :func:`run_stream`: a grid cell's adapter,
which adapts as it goes and returns DART's refined logits where it has a refiner (Alg. 2: DART at
test time; :func:`dartlib.experiments.engine.evaluate_cell`), a method around a user's own
classifier (:func:`dartlib.tta.wrap.stream_accuracy`), and a plain model in whatever BN mode it
is in (:mod:`dartlib.models.evaluation`; the clean test accuracy of source training). A predictor
is anything that maps a batch to its logits: an adapter, or a model, which adapts on nothing.

Where the images live is the stream's to know, not the caller's: uint8 NHWC on the host, each
batch converted there and moved to the stream's device, or resident on the device already
(:func:`dartlib.devices.resident`), each batch gathered and converted there. The predictions, the
per-image correctness and the accuracy are reductions of the loop's output; on a resident stream
the correctness is computed on the device and read back once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from dartlib.data.augmentation import images_to_float, to_tensor
from dartlib.data.protocols import TEST_BATCH_SIZE, batches

Predictor = Callable[[torch.Tensor], torch.Tensor]  # a float N x C x H x W batch -> its logits
BatchIndex = np.ndarray | torch.Tensor | slice  # which images of a stream one batch holds


@dataclass(frozen=True)
class TestStream:
    """Test images in the order a stream presents them, in batches of ``batch_size``.

    ``images``: uint8 N x H x W x C, a numpy array on the host (each batch goes to ``device``) or a
    tensor resident on a device (``device`` is then where it lives). ``labels`` (the same kind, on
    the same side) only score the predictions; None where there is nothing to score. ``order``:
    the indices of the images in stream order (a label-shift protocol's,
    :func:`dartlib.data.protocols.test_order`); None: every image in turn, batch by batch."""

    __test__ = False  # a library class, not a pytest test class

    images: np.ndarray | torch.Tensor
    labels: np.ndarray | torch.Tensor | None = None
    order: np.ndarray | None = None
    batch_size: int = TEST_BATCH_SIZE
    device: str | torch.device = "cpu"

    @property
    def resident(self) -> bool:
        """Whether the images are on the device already (else on the host)."""
        return isinstance(self.images, torch.Tensor)

    def __len__(self) -> int:
        return len(self.images) if self.order is None else len(self.order)

    def batch_indices(self) -> list[BatchIndex]:
        """Each batch's indices into :attr:`images` and :attr:`labels`, in stream order: slices
        without an order; else consecutive pieces of the order, on the device for a resident stream."""
        if self.order is None:
            return [slice(start, start + self.batch_size) for start in range(0, len(self), self.batch_size)]
        if not self.resident:
            return batches(self.order, batch_size=self.batch_size)
        order = torch.from_numpy(self.order).to(self.images.device)
        return [order[start : start + self.batch_size] for start in range(0, len(self.order), self.batch_size)]

    def inputs(self, index: BatchIndex) -> torch.Tensor:
        """The batch at ``index`` as the predictor takes it: float N x C x H x W in [0, 1], on the device."""
        if self.resident:
            return images_to_float(self.images[index])
        return to_tensor(self.images[index]).to(self.device)


def run_stream(predictor: Predictor, stream: TestStream, *, progress: bool = False,
               desc: str = "") -> Iterator[tuple[torch.Tensor, BatchIndex]]:
    """The one evaluation loop: for each batch of ``stream`` in order, the logits ``predictor``
    returns for it (an adapter adapts on the batch first) and the batch's index into the stream's
    images. The loop neither reads the device back nor changes the grad mode: a caller that only
    evaluates runs it under ``torch.no_grad()``."""
    # progress=False forces the bar off; otherwise tqdm decides (TQDM_DISABLE=1 silences it)
    bar = {} if progress else {"disable": True}
    for index in tqdm(stream.batch_indices(), desc=desc, leave=False, **bar):
        yield predictor(stream.inputs(index)), index


def stream_predictions(predictor: Predictor, stream: TestStream, *, progress: bool = False,
                       desc: str = "") -> np.ndarray:
    """The class ``predictor`` predicts (argmax of its logits) for each image of ``stream``, in stream order."""
    return np.concatenate([logits.argmax(1).cpu().numpy()
                           for logits, _ in run_stream(predictor, stream, progress=progress, desc=desc)])


def stream_correct(predictor: Predictor, stream: TestStream, *, progress: bool = False,
                   desc: str = "") -> np.ndarray:
    """Whether ``predictor`` classifies each image of ``stream`` as its label (bool, stream order);
    on a resident stream compared on the device and read back once, at the end."""
    if stream.labels is None:
        raise ValueError("the stream has no labels to score its predictions with")
    if stream.resident:
        hits = [logits.argmax(1) == stream.labels[index]
                for logits, index in run_stream(predictor, stream, progress=progress, desc=desc)]
        return torch.cat(hits).cpu().numpy()
    return np.concatenate([logits.argmax(1).cpu().numpy() == stream.labels[index]
                           for logits, index in run_stream(predictor, stream, progress=progress, desc=desc)])


def percent_correct(correct: np.ndarray) -> float:
    """Accuracy (%) of per-image outcomes: ``100.0 * hits / n``, as every clean and user-facing
    accuracy of the suite is computed (a grid cell's row keeps its own order of operations:
    :func:`dartlib.experiments.engine.evaluate_cell`)."""
    return 100.0 * int(correct.sum()) / len(correct)
