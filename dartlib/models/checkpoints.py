"""Checkpoint files: how a trained model, a refiner or an IABN copy is written and read.

Every file is written atomically (a temporary name beside it, then a rename) and read with
``weights_only=True`` (tensors and plain values only, so a shared file cannot run code). A source
checkpoint (:func:`save_source`, :func:`load_checkpoint`) holds its weights and metadata, checked
against its name and the caller's expectations before a weight is used; a damaged file names the
command that restores it (git for a committed one, retraining for any other).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from dartlib.data.files import REGENERATE, DamagedFileError, atomic_path
from dartlib.data.dataset import Dataset
from dartlib.models.artefacts import damaged_remedy, manifest_problem, refused
from dartlib.models.backbones import build
from dartlib.paths import data_root


def load_weights(path: Path | str, *, map_location: str = "cpu", required: tuple[str, ...] = ()) -> dict:
    """``torch.load`` with ``weights_only=True``: tensors and plain values only, so a shared or
    downloaded checkpoint cannot run code. Metadata saved by earlier versions holds
    ``torch.__version__`` as a ``TorchVersion`` (a ``str`` subclass), allowed here by name.
    A file that a ``MANIFEST.json`` lists is compared with the sha256 recorded there before a byte
    of it is unpickled (:func:`dartlib.models.artefacts.manifest_problem`) and refused, set aside,
    when it differs. A truncated or foreign file, or one without the entries ``required``, raises
    :class:`~dartlib.data.files.DamagedFileError` naming it."""
    import pickle
    import zipfile

    from torch.torch_version import TorchVersion

    path = Path(path)
    listed = manifest_problem(path) if path.is_file() else None
    if listed is not None:
        raise refused(path, listed, anew="", listed=True)
    try:
        with torch.serialization.safe_globals([TorchVersion]):
            blob = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, OSError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError) as err:
        if not path.is_file():
            raise
        raise _failure(DamagedFileError, path, f"not a readable checkpoint ({type(err).__name__}: {str(err)[:120]})") from None
    missing = [k for k in required if not isinstance(blob, dict) or k not in blob]
    if missing:
        raise _failure(DamagedFileError, path, f"lacks the entries {missing}")
    return blob


def _failure(kind: type[DamagedFileError], path: Path | str, problem: str) -> DamagedFileError:
    """The error to raise for a file that failed a check, with its remedy; the remedy (a git call)
    is worked out only here, when a check fails, never on a good file's read."""
    return kind(path, problem, damaged_remedy(Path(path)))


def check_training_data(*, checkpoint: Path, meta: dict, train: Dataset) -> None:
    """Raise ``ValueError`` when ``train`` is not the data the source model in ``checkpoint`` was
    trained on (g_phi and NOTE's IABN copy are trained on the source's training set, Section 4).
    A checkpoint that records no digest (a released model) is not checked."""
    recorded = meta.get("dataset_digest")
    if recorded and recorded != train.digest():
        raise ValueError(f"{checkpoint} was trained on {meta.get('dataset', '?')} with digest {recorded[:16]}, but the "
                         f"{train.name}/{train.split} data in use have digest {train.digest()[:16]}: the data changed "
                         "since the model was trained; restore the original data, or delete the checkpoint (and the "
                         "refiners and IABN copies beside it) to retrain on the data in use")


# The training stage's command where a caller names no profile (each caller names its own where it can).
TRAINING_COMMAND = "python -m dartlib train --profile PROFILE"


class TrainedInputsMissing(FileNotFoundError):
    """Trained inputs that preparing a context only loads are absent; the message names each and the
    command of the training stage that makes them (``command``)."""

    def __init__(self, paths: list[Path], *, command: str = TRAINING_COMMAND) -> None:
        self.paths, self.command = list(paths), command
        super().__init__(f"these trained inputs are absent: {', '.join(str(p) for p in self.paths)}; `{command}` "
                         "trains them, or `git checkout -- data/checkpoints` restores the committed ones")


def require_trained(paths: list[Path], *, command: str = TRAINING_COMMAND) -> None:
    """Raise :class:`TrainedInputsMissing` naming every missing trained input and ``command``, the
    training stage that makes them."""
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise TrainedInputsMissing(missing, command=command)


def checkpoint_path(*, dataset: str, arch: str, recipe: str, seed: int, split: str = "train",
                    directory: Path | None = None) -> Path:
    """Where a source checkpoint lives (in ``directory``, by default ``<data root>/checkpoints``,
    where the committed ones are: :mod:`dartlib.models.artefacts`); ``split`` names the training split
    when it is not ``train`` (a domain of PACS, OfficeHome or DomainNet-126)."""
    name = dataset if split == "train" else f"{dataset}-{split}"
    return (directory or data_root() / "checkpoints") / f"{name}-{arch}-{recipe}-seed{seed}.pt"


def save_weights(obj: object, *, path: Path) -> None:
    """``torch.save`` to ``path`` atomically (:func:`dartlib.data.files.atomic_path`: a unique
    temporary name beside it, then a rename), so that a reader or a second writer never finds half
    a file."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load_or_train(path: Path, *, train: Callable[[], dict], required: tuple[str, ...] = ()) -> dict:
    """The blob saved at ``path`` (:func:`load_weights`, which names a damaged file or one that lacks
    a ``required`` entry), or the one ``train()`` returns, saved there first (:func:`save_weights`):
    what is trained once per source model is reused after."""
    if not path.is_file():
        save_weights(train(), path=path)
    return load_weights(path, required=required)


def save_source(model: nn.Module, meta: dict, path: Path) -> Path:
    """Write a source checkpoint in this library's format (weights + metadata with at least
    ``arch`` and ``num_classes``), e.g. for a released or pretrained model."""
    missing = {"arch", "num_classes"} - set(meta)
    if missing:
        raise ValueError(f"source metadata needs {sorted(missing)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_weights({"model": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "meta": meta}, path=path)
    return path


class CheckpointMismatchError(DamagedFileError):
    """A readable checkpoint that is not what its metadata, its name or the caller asks for (another
    architecture, other weight shapes, another number of classes); the message names the file and
    what differs."""

    def __init__(self, path: Path | str, problem: str, remedy: str = REGENERATE) -> None:
        super().__init__(path, problem, remedy)
        self.args = (f"{path} does not match: {problem}. Remedy: {remedy}",)


_NAME_KEYS = ("dataset", "arch", "recipe", "seed")


def check_source_meta(path: Path, meta: object, *, expect: dict | None = None) -> None:
    """Raise :class:`CheckpointMismatchError` when a source checkpoint's metadata names no known
    architecture or number of classes, disagrees with the file's name
    (:func:`checkpoint_path`: ``<dataset>-<arch>-<recipe>-seed<seed>.pt``), or with ``expect``
    (what the caller, e.g. a profile, asks for: ``arch``, ``num_classes``, ``dataset``...)."""
    from dartlib.models.backbones import ARCHITECTURES

    path = Path(path)
    if not isinstance(meta, dict):
        raise _failure(DamagedFileError, path, f"its metadata is {type(meta).__name__}, not a mapping")
    arch, classes = meta.get("arch"), meta.get("num_classes")
    if not isinstance(arch, str) or arch.removesuffix("-imagenet") not in ARCHITECTURES:
        raise _failure(CheckpointMismatchError, path, f"its metadata names architecture {arch!r}, not one of "
                                            f"{', '.join(ARCHITECTURES)}")
    if not isinstance(classes, int) or isinstance(classes, bool) or classes < 1:
        raise _failure(CheckpointMismatchError, path, f"its metadata gives num_classes {classes!r}, not a positive integer")
    if all(k in meta for k in _NAME_KEYS) and re.search(r"-seed\d+(\.partial)?\.pt$", path.name):
        named = checkpoint_path(dataset=meta["dataset"], arch=arch, recipe=meta["recipe"], seed=meta["seed"],
                                split=meta.get("train_split", "train"), directory=path.parent)
        if named.name != path.name:
            raise _failure(CheckpointMismatchError, path, f"it holds {arch} trained on {meta['dataset']} (recipe {meta['recipe']}, "
                                                f"seed {meta['seed']}), which would be named {named.name}")
    differ = [f"{key} {meta.get(key)!r} where {value!r} is asked for" for key, value in (expect or {}).items()
              if meta.get(key) != value]
    if differ:
        raise _failure(CheckpointMismatchError, path, "its metadata has " + ", ".join(differ))


def check_state_shapes(path: Path, meta: dict, wanted: dict, saved: object) -> None:
    """Raise :class:`CheckpointMismatchError` unless ``saved`` holds exactly the entries of
    ``wanted`` (a freshly built model's state), each of the same shape."""
    what = f"{meta['arch']} with {meta['num_classes']} classes (as its metadata says)"
    if not isinstance(saved, dict) or not all(isinstance(v, torch.Tensor) for v in saved.values()):
        raise _failure(DamagedFileError, path, "its 'model' entry is not a mapping of tensors")
    missing = [k for k in wanted if k not in saved]
    unexpected = [k for k in saved if k not in wanted]
    if missing or unexpected:
        raise _failure(CheckpointMismatchError, path, f"its weights are not those of {what}: {len(missing)} entries missing"
                                            f"{f' (first {missing[0]})' if missing else ''}, {len(unexpected)} unexpected"
                                            f"{f' (first {unexpected[0]})' if unexpected else ''}")
    shapes = [(k, list(saved[k].shape), list(v.shape)) for k, v in wanted.items() if saved[k].shape != v.shape]
    if shapes:
        name, got, need = shapes[0]
        more = f" ({len(shapes)} entries differ)" if len(shapes) > 1 else ""
        raise _failure(CheckpointMismatchError, path, f"weight {name} has shape {got}, {what} needs {need}{more}")


def load_checkpoint(path: Path | str, *, device: str = "cpu", expect: dict | None = None) -> tuple[nn.Module, dict]:
    """A trained source model (eval mode) and its metadata. Before any weight is used, the file is
    checked against itself and its name (metadata naming a known architecture and number of classes
    that derive to the file's name: :func:`check_source_meta`; every weight's shape:
    :func:`check_state_shapes`), against ``MANIFEST.json`` where that lists it (the sha256 recorded
    there: :func:`dartlib.models.artefacts.manifest_problem`, hashed once per process), and against
    ``expect``. A file that fails the first two checks is not what its name says: it is set aside
    (:func:`dartlib.data.files.set_aside`) and never used, and the error names it (issue 62); one
    that is only not what the caller asks for (``expect``) is left in place."""

    path = Path(path)
    blob = load_weights(path, map_location=device, required=("model", "meta"))
    meta = blob["meta"]
    try:
        check_source_meta(path, meta)
        # An "-imagenet" suffix names the initialisation of a fine-tuned model, not its architecture;
        # the saved weights replace it, so loading needs no pretrained download.
        model = build(meta["arch"].removesuffix("-imagenet"), num_classes=meta["num_classes"]).to(device)
        check_state_shapes(path, meta, model.state_dict(), blob["model"])
    except DamagedFileError as err:
        raise _set_aside(err) from None
    check_source_meta(path, meta, expect=expect)
    model.load_state_dict(blob["model"])
    return model.eval(), meta


def _set_aside(err: DamagedFileError) -> DamagedFileError:
    """``err`` (a source checkpoint that is not what its name says) with its file set aside, of the
    same type and remedy: git restores a committed file; any other is trained again by the command
    that made it (a profile's source model) or saved again (:func:`save_source`)."""
    from dartlib.data.files import set_aside

    aside = set_aside(err.path)
    remedy = err.remedy if err.remedy != REGENERATE else (
        "run the same command again: a profile's source model is trained anew (a model saved with save_source: "
        "save it again)")
    return type(err)(err.path, f"{err.problem}; set aside as {aside.name}", remedy)
