"""The test-time engine: one cell (a method, with or without DART, over one test stream) run online.

Every cell starts from a fresh copy of the model its method adapts (the source classifier, or a
trained input the method declares: :attr:`dartlib.tta.base.Adapter.reads_context`), adapts online
over the stream in batches, and scores the predictions it returns (the refined ones with DART).
Shared inputs (the source model, g_phi, the methods' trained inputs, the corrupted test sets) are
loaded once by the caller and passed in; the engine names no method. A cell's test stream is read
by :mod:`dartlib.experiments.cell_streams`, walked by the one evaluation loop
(:func:`dartlib.models.streams.run_stream`), and the frozen source model's logits its refiner reads
are memoised across cells by :mod:`dartlib.experiments.source_logits`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import inspect
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from dartlib import tta
from dartlib.dart.refiner import Refiner, config_dict
from dartlib import devices
from dartlib.devices import resident
from dartlib.devices import precision as device_precision
from dartlib.data.protocols import TEST_BATCH_SIZE
from dartlib.experiments import grid as results_store
from dartlib.experiments.cell_streams import cell_stream, set_digest, stream_digest
from dartlib.experiments.grid import Cell
from dartlib.experiments.settings import Settings
from dartlib.models.artefacts import weights_digest
from dartlib.models.backbones import bf16_forward
from dartlib.models.streams import Predictor, TestStream, stream_correct
from dartlib.experiments.outcomes import CellOutcomes
from dartlib.experiments.source_logits import SharedSourceLogits


def machine_device() -> str:
    """Where a context's forwards run unless it is told otherwise: the machine's device,
    :func:`dartlib.devices.default_device` (``$DART_DEVICE``, else the GPU when there is one, else
    the CPU), looked up when the context is made."""
    return devices.default_device()


@dataclass
class TestTimeContext:
    """What every cell of a grid shares at test time: the source model, the refiners, the methods'
    trained inputs (``trained``, by the names their methods read), the test batch size, the methods' options and where the forwards run (``device``, by
    default the machine's: :func:`machine_device`). A context that differs from another in a few
    fields (another refiner, batch size or options) is derived from it with :meth:`variant`, which
    keeps its device and precision."""

    __test__ = False  # a library class, not a pytest test class

    source: nn.Module
    refiner: Refiner | None
    trained: dict = field(default_factory=dict)  # the methods' trained inputs by name (Adapter.context_fields)
    batch_size: int = TEST_BATCH_SIZE
    device: str = field(default_factory=machine_device)
    options: dict = field(default_factory=dict)  # per-method keyword options
    refiners: dict = field(default_factory=dict)  # further named refiners (e.g. "dart-split")
    share_source: bool = True  # one memoised f_theta0_bar for all cells (see source_logits.SharedSourceLogits)
    # a folder where that memo persists between runs (SharedSourceLogits.save), None: memory only
    logits_store: Path | None = None
    # the backbone's forward precision, "" for the device's (:func:`dartlib.devices.precision`)
    precision: str = ""
    _shared: SharedSourceLogits | None = field(default=None, init=False, repr=False)
    _memo_from: TestTimeContext | None = field(default=None, init=False, repr=False)  # whose memo a variant shares
    _resident: dict = field(default_factory=dict, init=False, repr=False)  # test sets on the device
    _saved: int = field(default=0, init=False, repr=False)
    _saved_at: float = field(default=0.0, init=False, repr=False)

    # Fields that say where and how the forwards run, not what they compute (the cells' numbers
    # depend on them at rounding level only; a profile's device is part of its name).
    NOT_INPUTS = ("device", "share_source", "logits_store", "_shared", "_memo_from", "_resident", "_saved",
                  "_saved_at")
    # Fields added after ENGINE_REVISION 2, with the value every row before them was computed
    # under: at that value a field leaves the digest as it was, so those rows stay current.
    LATER_FIELDS = {"precision": "fp32"}  # as dartlib.dart.refiner.LATER_FIELDS does for g_phi's settings

    def variant(self, **changes) -> TestTimeContext:
        """This context with ``changes`` (any of its fields but ``device`` and ``precision``:
        another refiner, test batch size, options, source model...), on the same device at the same
        precision. With the same source model it shares this context's f_theta0_bar memo (whose
        entries are a function of the source and the batch alone), else it has its own; it has its
        own resident test sets (made on first use); its dictionaries are copies, so changing one
        leaves this context's as it was."""
        settable = {f.name for f in dataclasses.fields(self) if f.init}
        unknown = sorted(set(changes) - settable)
        if unknown:
            raise TypeError(f"TestTimeContext has no field {', '.join(unknown)}; valid: {', '.join(sorted(settable))}")
        kept = sorted({"device", "precision"} & set(changes))
        if kept:
            raise ValueError(f"a variant keeps its context's {' and '.join(kept)}; to run elsewhere, build a "
                             f"TestTimeContext(...) naming device= (and precision=) instead")
        copies = {name: dict(getattr(self, name)) for name in ("options", "refiners", "trained") if name not in changes}
        derived = dataclasses.replace(self, **copies, **changes)
        if not {"source", "logits_store"} & set(changes):
            derived._memo_from = self  # one forward per batch for every variant of a study
        return derived

    def inputs(self, cell: Cell) -> str:
        """A digest of everything a cell's result depends on besides its key (for
        :func:`dartlib.experiments.grid.run_grid`): every field of this context (the test batch
        size, the method's options, any field added later) with the trained inputs the cell reads
        (the source model's weights, the weights and settings of its refiner, the trained inputs its method reads),
        the test stream itself (:func:`~dartlib.experiments.cell_streams.stream_digest`: the test
        images, labels and order) and
        the revisions of the method and of the engine. Fields are read from the dataclass, not
        from a list kept by hand, so that a new setting cannot be left out; only
        :attr:`NOT_INPUTS` are skipped."""
        parts = [f"engine@{ENGINE_REVISION}", f"{cell.method}@{tta.METHODS[cell.method].revision}",
                 f"stream={stream_digest(cell)}"]
        for f in dataclasses.fields(self):
            if f.name in self.NOT_INPUTS:
                continue
            if f.name == "trained":  # one part per name a method reads, as when each was a field of its own
                parts += [f"{name}={self._trained_value(name, cell)}" for name in trained_input_names()]
                continue
            value = self._input_value(f.name, cell)
            if self.LATER_FIELDS.get(f.name) != value:
                parts.append(f"{f.name}={value}")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]

    def _input_value(self, name: str, cell: Cell) -> str:
        """The part of field ``name`` that ``cell`` reads, as text: of the keyed fields (the
        refiners, the methods' trained inputs, the per-method options) the entry the cell selects, of every
        other field its value (a module by its weights)."""
        if name in ("refiner", "refiners"):
            if name == "refiners" or cell.refiner == "none":
                return ""  # both are read through the cell's refiner name, once
            refiner = {"dart": self.refiner, **self.refiners}.get(cell.refiner)
            return "absent" if refiner is None else _refiner_digest(refiner)
        if name == "options":
            return repr(sorted(self.options.get(cell.method, {}).items()))
        if name == "precision":
            return self.forward_precision()
        value = getattr(self, name)
        return _state_digest(value) if isinstance(value, nn.Module) else repr(value)

    def _trained_value(self, name: str, cell: Cell) -> str:
        """The digest of the trained input ``name`` where the cell's method reads it and it is there, else ""."""
        read = name in tta.METHODS[cell.method].reads_context and self.trained.get(name) is not None
        return _state_digest(self.trained[name]) if read else ""

    def forward_precision(self) -> str:
        """:attr:`precision`, or the device's (:func:`dartlib.devices.precision`)."""
        return self.precision or device_precision(self.device)

    def on_device(self, model: nn.Module) -> nn.Module:
        """``model`` moved to :attr:`device`; on a GPU channels-last, with bfloat16 forwards where
        :meth:`forward_precision` says so (:func:`dartlib.models.backbones.bf16_forward`)."""
        model = model.to(self.device)
        if resident(self.device):
            model = model.to(memory_format=torch.channels_last)
            if self.forward_precision() == "bf16":
                bf16_forward(model)
        return model

    def resident_set(self, cell: Cell, images: np.ndarray, labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The test set ``cell`` draws from (``images``, ``labels``:
        :func:`~dartlib.experiments.cell_streams.cell_stream`'s) on
        :attr:`device`, copied there on first use; the last 16 sets copied stay there."""
        key = set_digest(cell)
        if key not in self._resident:
            if len(self._resident) >= 16:
                self._resident.pop(next(iter(self._resident)))
            self._resident[key] = (torch.from_numpy(np.ascontiguousarray(images)).to(self.device),
                                   torch.from_numpy(labels).to(self.device))
        return self._resident[key]

    def test_stream(self, cell: Cell) -> TestStream:
        """``cell``'s test stream (:func:`~dartlib.experiments.cell_streams.cell_stream`) in batches
        of this context's test batch size (a ``test_batch=`` item in the cell's params overrides
        it), on :attr:`device`: resident there on a GPU (:func:`dartlib.devices.resident`; the set copied once, :meth:`resident_set`)
        but for a pooled stream; else on the host, each batch moved there."""
        images, labels, order = cell_stream(cell)
        batch_size = cell.options.get("test_batch", self.batch_size)  # the test batch-size study
        if resident(self.device) and "pool" not in cell.options:
            images, labels = self.resident_set(cell, images, labels)
        return TestStream(images=images, labels=labels, order=order, batch_size=batch_size, device=self.device)

    def shared_source(self) -> SharedSourceLogits:
        """The memoised f_theta0_bar every cell shares, made on first use (with the entries
        :attr:`logits_store` holds)."""
        if self._shared is None and self._memo_from is not None:
            self._shared = self._memo_from.shared_source()
        if self._shared is None:
            self._shared = SharedSourceLogits(self.source, revision=ENGINE_REVISION)
            self._shared.frozen = self.on_device(self._shared.frozen)
            if self.logits_store is not None:
                self._saved = self._shared.load(self.logits_store)
        return self._shared

    def save_shared_source(self, *, every: float = 0.0) -> None:
        """Write the shared memo to :attr:`logits_store` if it has grown since it was last written
        and, with ``every``, at least that many seconds have passed since then (the file is tens of
        MB: written once a minute while a grid runs, and once at its end, not after every cell)."""
        if self.logits_store is None or self._shared is None or len(self._shared) <= self._shared.on_disk:
            return
        if time.monotonic() - self._saved_at < every:
            return
        self._shared.save(self.logits_store)
        self._saved, self._saved_at = len(self._shared), time.monotonic()

    def adapter(self, cell: Cell) -> tta.Adapter:
        refiner = None
        if cell.refiner != "none":
            named = {name: r for name, r in {"dart": self.refiner, **self.refiners}.items() if r is not None}
            if cell.refiner not in named:
                raise ValueError(f"no refiner {cell.refiner!r} in this context; valid: none, {', '.join(named)}")
            refiner = named[cell.refiner].to(self.device)
            refiner.reset()
        cls = tta.METHODS[cell.method]
        model, options = cls.from_context(self)  # the model it adapts, the options it takes from here
        options.update(self.options.get(cell.method, {}))
        options.update({k: v for k, v in cell.options.items() if k in cls.cell_options})
        if "seed" in inspect.signature(cls.__init__).parameters:
            options.setdefault("seed", cell.seed)  # methods with their own randomness (memory, views)
        shared = None
        if self.share_source:
            # Every frozen copy an adapter would hold is f_theta0_bar of ``self.source`` (a method that
            # adapts a trained input takes ``source`` from this context): one memo serves all.
            self.save_shared_source(every=60.0)  # what the cells before this one added
            shared = self.shared_source()
        return tta.make(cell.method, self.on_device(model), refiner=refiner, source_logits=shared, **options)


# Bumped when the engine's computation of a cell changes; part of every cell's input digest.
# 2: the digest itself covers every context field and the test stream (rows of 1 are stale: they
# are recomputed, never re-keyed).
ENGINE_REVISION = 2

_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _refiner_digest(refiner: Refiner) -> str:
    """A refiner's weights (g_phi, DART-split's detector), settings and test-time temperature."""
    parts = [_state_digest(refiner.module), repr(sorted(config_dict(refiner.config).items())),
             f"T={refiner.temperature},adaptive={refiner.adaptive_temperature}"]
    if refiner.detector is not None:
        parts.append(_state_digest(refiner.detector))
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _state_digest(module: nn.Module) -> str:
    """sha256 of a module's state, memoised per module object (hashing ResNet weights for every
    cell would cost more than some cells): the shared models of a context are never trained."""
    if module not in _DIGESTS:
        _DIGESTS[module] = weights_digest(module)[:16]
    return _DIGESTS[module]


def trained_input_names() -> list[str]:
    """Every name of a trained input some method reads (:attr:`dartlib.tta.base.Adapter.reads_context`), sorted."""
    return sorted({name for cls in tta.METHODS.values() for name in cls.reads_context})


def paired(cells: list[Cell]) -> list[Cell]:
    """``cells`` less those that pair a refiner with a method that takes none
    (:attr:`dartlib.tta.Adapter.takes_refiner`: NoAdapt)."""
    return [c for c in cells if c.refiner == "none" or tta.METHODS[c.method].takes_refiner]


def evaluate_cell(cell: Cell, context: TestTimeContext, *, progress: bool = False) -> dict:
    """Run one cell (Alg. 2: DART at test time, with the cell's refiner); returns ``n``,
    ``accuracy`` and the per-image ``outcomes`` for :func:`dartlib.experiments.grid.run_grid`.
    The cell's adapter walks its test stream (:meth:`TestTimeContext.test_stream`: on a GPU resident
    there) through the one evaluation loop, :func:`dartlib.models.streams.run_stream`."""
    torch.manual_seed(cell.seed)
    stream = context.test_stream(cell)
    with _named_batches(context.adapter(cell), context=context, cell=cell, stream=stream) as predictor:
        correct = stream_correct(predictor, stream, progress=progress, desc=cell.label())
    outcomes = CellOutcomes.from_stream(order=stream.order, correct=correct, size=len(stream.labels))
    # 100 * (correct / n), not (100 * correct) / n: the two differ in the last bit, and the
    # stored grids were computed this way.
    return {"n": len(stream), "accuracy": 100.0 * (int(correct.sum()) / len(stream)), "outcomes": outcomes}


@contextlib.contextmanager
def _named_batches(adapter: tta.Adapter, *, context: TestTimeContext, cell: Cell,
                   stream: TestStream) -> Iterator[Predictor]:
    """``adapter`` as the loop's predictor. On a resident stream the shared f_theta0_bar memo is
    told, before each batch, which batch it reads (the stream's digest, batch size and precision,
    and the batch's number), so that the batch's bytes are not read back from the device to be
    hashed; the memo's key is cleared when the stream ends."""
    shared = context._shared if context.share_source else None
    if shared is None or not stream.resident:
        yield adapter
        return
    name = f"{stream_digest(cell)}|b{stream.batch_size}|{context.forward_precision()}"
    numbers = itertools.count()

    def predictor(x: torch.Tensor) -> torch.Tensor:
        shared.key = f"{name}|{next(numbers)}"
        return adapter(x)

    try:
        yield predictor
    finally:
        shared.key = None


def run_cells(cells: Iterable[Cell], context: TestTimeContext | Callable[[Cell], TestTimeContext], *, path: Path,
              experiment: str, progress: bool = True, cell_progress: bool = False,
              reuse: Sequence[Path] = ()) -> pd.DataFrame:
    """The one way a list of cells is computed: each through :func:`evaluate_cell` with ``context``
    (one for all, or a function giving each cell its own), stored by
    :func:`dartlib.experiments.grid.run_grid` in ``path`` keyed by that context's inputs, rows of
    the files in ``reuse`` borrowed where they are the same cell with the same inputs."""
    context_of = context if not isinstance(context, TestTimeContext) else (lambda _: context)
    return results_store.run_grid(cells, lambda c: evaluate_cell(c, context_of(c), progress=cell_progress), path=path,
                                  experiment=experiment, progress=progress, inputs=lambda c: context_of(c).inputs(c),
                                  reuse=reuse)


def prepare_context(
    *, settings: Settings, method_inputs: bool = True, with_refiner: bool = True, device: str | None = None,
    progress: bool = False,
) -> tuple[TestTimeContext, dict]:
    """What every Table 1 cell of a profile shares, loaded: the source model, the refiner of
    notebook 04, what the methods of :data:`dartlib.tta.METHODS` add to a context
    (:meth:`~dartlib.tta.base.Adapter.context_fields`, under ``trained``; their profile options,
    :meth:`~dartlib.tta.base.Adapter.profile_options`), all from ``settings`` (a profile's or a
    notebook's values; the g_phi settings through :meth:`Settings.dart_config`). Nothing is trained
    or generated here: the training stage
    (:func:`dartlib.experiments.training_stage.train_profile_inputs`) makes these inputs, and an
    absent one raises :class:`~dartlib.models.checkpoints.TrainedInputsMissing` naming it and the
    stage's command. ``method_inputs=False`` skips the methods' trained inputs where those methods
    are not run; ``with_refiner=False`` the refiner of notebook 04 where a study brings its own
    (:meth:`TestTimeContext.variant`). Returns the context and the source checkpoint's metadata.
    ``device`` (default :func:`dartlib.devices.default_device`: the GPU when there is one) is where
    every cell adapts; the context's own source model stays on the CPU."""
    from dartlib.dart.intermediate import load_refiners, refiner_path
    from dartlib.models.checkpoints import load_checkpoint, require_trained

    device = device or devices.default_device()
    config = settings.dart_config()
    methods = list(tta.METHODS.values()) if method_inputs else []
    checkpoint = settings.checkpoint()
    command = settings.training_command()
    require_trained([checkpoint] + ([refiner_path(checkpoint, config)] if with_refiner else [])
                    + [path for cls in methods for path in cls.context_files(settings=settings, checkpoint=checkpoint)],
                    command=command)
    model, meta = load_checkpoint(checkpoint)
    refiner = load_refiners(checkpoint, [config], command=command)[0][0] if with_refiner else None
    trained = {}
    for cls in methods:
        trained.update(cls.context_fields(settings=settings, checkpoint=checkpoint, model=model, train=None,
                                         device=device, progress=progress))
    return source_context(settings=settings, source=model, refiner=refiner, trained=trained, device=device), meta


def source_context(*, settings: Settings, source: nn.Module, refiner: Refiner | None = None,
                   trained: dict | None = None, device: str) -> TestTimeContext:
    """The test-time context of a profile's cells around a loaded source model (what
    :func:`prepare_context` returns once its inputs are loaded or trained): the methods' profile
    options (:meth:`~dartlib.tta.base.Adapter.profile_options`), the profile's test batch size,
    ``refiner`` and the methods' ``trained`` inputs, on ``device``."""
    options = {name: opts for name, cls in tta.METHODS.items() if (opts := cls.profile_options(settings))}
    return TestTimeContext(source=source, refiner=refiner, device=device, options=options,
                           batch_size=settings.test.batch_size, trained=trained or {})


