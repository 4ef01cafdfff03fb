"""The trained artefacts committed with the suite: weights every machine shares (DESIGN, Portability).

Training the same recipe on another CPU type (or with other math kernels) changes a model in its
last bits, and a 2-epoch smoke model or a test-time method amplifies that into points downstream.
So the small trained models that the notebooks' results depend on are committed under
``data/checkpoints/``: the smoke profile's source model, its refiners g_phi and NOTE's IABN copy,
and the cpu profile's source model, refiners and IABN copy. A fresh clone loads them instead of
training, and the input digests of the committed results (:meth:`dartlib.experiments.engine.TestTimeContext.inputs`)
match on any machine. ``MANIFEST.json`` beside them lists each file with its sha256, size, kind
and provenance (recipe or g_phi config, training-data digest, library version, device); a test
checks every committed file against it. Training still happens when a file is absent (or the data
root is moved with ``DART_DATA_DIR``); notebook 02 retrains the smoke source model in a scratch
folder and compares it with the committed one (:func:`dartlib.models.training.retrain_and_compare`, judged by
:func:`retrained_within_tolerance`).

After training an artefact that should be shared, run ``python -m dartlib artefacts manifest``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import torch

from dartlib.data.files import (REGENERATE, DamagedFileError, committed_remedy, file_stamp, set_aside, sha256_once,
                                write_text_atomic)
from dartlib.provenance import sha256_file
from dartlib.paths import REPO_ROOT

COMMITTED_DIR: Path = REPO_ROOT / "data" / "checkpoints"
MANIFEST: Path = COMMITTED_DIR / "MANIFEST.json"
# Source checkpoints whose derived artefacts (``<stem>.<variant>-<hash>.pt``) are committed.
COMMITTED_STEMS: tuple[str, ...] = ("fmnist-small-cnn-smoke-seed0", "cifar10-resnet26-w16-cpu-seed0",
                                    "cifar10-resnet26-w8-cpu-seed0")  # the last: the backbone-strength study
# Sub-folders committed whole: notebook 16's own model (torchvision's ResNet-18 trained briefly) and
# its g_phi (dartlib.studies.own_model.COMMITTED_DIR), listed as "<folder>/<file>".
COMMITTED_FOLDERS: tuple[str, ...] = ("own-model",)


def weights_digest(module: torch.nn.Module) -> str:
    """sha256 over a module's state (names and raw bytes, in name order): the same weights give
    the same digest on every machine, whatever their dtype."""
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def sha256_of(path: Path) -> str:
    """sha256 of a file's bytes (:func:`dartlib.provenance.sha256_file`)."""
    return sha256_file(path)


def committed_files(directory: Path = COMMITTED_DIR) -> list[Path]:
    """The checkpoint files of :data:`COMMITTED_STEMS` in ``directory`` (partial or temporary
    files excluded), sorted by name."""
    files = []
    for stem in COMMITTED_STEMS:
        files += [p for p in directory.glob(f"{stem}*.pt") if p.name == f"{stem}.pt" or p.name.startswith(f"{stem}.")]
    for folder in COMMITTED_FOLDERS:
        files += [p for p in (directory / folder).glob("*.pt") if not p.name.startswith(".")]
    return sorted(p for p in files if not p.name.endswith(".partial.pt"))


def _name(path: Path, directory: Path) -> str:
    """A committed file's name in the manifest: relative to ``directory``."""
    return path.relative_to(directory).as_posix()


def _plain(value):
    """Metadata as JSON-safe plain values (``TorchVersion`` is a ``str`` subclass)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return str(value)


def describe(path: Path, directory: Path = COMMITTED_DIR) -> dict:
    """One manifest entry: file, sha256, bytes, kind (source, refiner, iabn, own-model) and provenance."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    entry = {"file": _name(path, directory), "sha256": sha256_of(path), "bytes": path.stat().st_size}
    if blob.get("meta", {}).get("kind") == "own-model":
        meta = blob["meta"]
        entry.update(kind="own-model", arch=meta["arch"], recipe=_plain({k: meta.get(k) for k in (
            "train_images", "epochs", "batch_size", "lr", "seed")}), train_digest=meta.get("train_digest"),
            cpu=meta.get("cpu"), device=meta.get("device"), dartlib_version=meta.get("dartlib_version"),
            torch_version=meta.get("torch_version"))
    elif "module" in blob and "config" in blob:
        meta = blob.get("meta", {})
        entry.update(kind="refiner", config=_plain(blob["config"]), source_checkpoint=meta.get("source_checkpoint"),
                     train_digest=meta.get("train_digest"), device=meta.get("device"),
                     dartlib_version=meta.get("dartlib_version"))
        if meta.get("cpu"):
            entry["cpu"] = meta["cpu"]
    elif "meta" in blob and "arch" in blob["meta"]:
        meta = blob["meta"]
        entry.update(kind="source", arch=meta["arch"], dataset=meta.get("dataset"), recipe=meta.get("recipe"),
                     recipe_values=_plain(meta.get("recipe_values")), train_digest=meta.get("dataset_digest"),
                     clean_test_accuracy=meta.get("clean_test_accuracy"), device=meta.get("device"),
                     dartlib_version=meta.get("dartlib_version"), torch_version=_plain(meta.get("torch_version")))
    else:
        meta = blob["meta"]
        source = path.with_name(f"{meta['source_checkpoint'].removesuffix('.pt')}.pt")
        entry.update(kind="iabn", source_checkpoint=meta["source_checkpoint"],
                     recipe={k: _plain(meta.get(k)) for k in ("epochs", "k", "per_class", "seed")},
                     # fine-tuned on the source model's own training set (the digest is the source's)
                     train_digest=_source_digest(source), device=meta.get("device"),
                     dartlib_version=meta.get("dartlib_version"))
    return entry


def _source_digest(source: Path) -> str | None:
    if not source.is_file():
        return None
    return torch.load(source, map_location="cpu", weights_only=True)["meta"].get("dataset_digest")


def write_manifest(directory: Path = COMMITTED_DIR) -> Path:
    """(Re)write ``MANIFEST.json`` for the committed files in ``directory``."""
    entries = [describe(p, directory) for p in committed_files(directory)]
    manifest = {
        "about": "trained artefacts committed so that every machine computes from the same weights "
                 "(dartlib.models.artefacts); regenerate with `python -m dartlib artefacts manifest`",
        "total_bytes": sum(e["bytes"] for e in entries),
        "files": entries,
    }
    path = directory / MANIFEST.name
    write_text_atomic(path, json.dumps(manifest, indent=1) + "\n")  # whole or not at all
    return path


def read_manifest(path: Path = MANIFEST) -> dict:
    """``MANIFEST.json``, checked: valid JSON holding a ``files`` list of entries, each with a
    ``file`` name and a 64-digit ``sha256``; anything else raises
    :class:`~dartlib.data.files.DamagedFileError` naming the file, the place and the remedy."""
    remedy = (f"restore it with `git checkout -- {path}`, or rewrite it from the files with "
              "`python -m dartlib artefacts manifest`")
    try:
        manifest = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise DamagedFileError(path, "not text", remedy) from None
    except json.JSONDecodeError as err:
        raise DamagedFileError(path, f"not valid JSON at line {err.lineno} column {err.colno} ({err.msg})", remedy) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise DamagedFileError(path, "it holds no `files` list", remedy)
    for i, entry in enumerate(manifest["files"]):
        if not (isinstance(entry, dict) and isinstance(entry.get("file"), str)
                and re.fullmatch(r"[0-9a-f]{64}", str(entry.get("sha256", "")))):
            raise DamagedFileError(path, f"entry {i + 1} of `files` lacks a file name or a 64-digit sha256 "
                                         f"({str(entry)[:80]})", remedy)
    return manifest


class ManifestProblem(str):
    """One line of :func:`verify_manifest`; ``kind`` says what the command's exit status reports:
    ``damaged`` (a sha256 that differs, an unreadable manifest), ``missing`` (a listed file
    absent) or ``unlisted`` (a committed-stem file the manifest lacks)."""

    def __new__(cls, text: str, kind: str) -> ManifestProblem:
        line = super().__new__(cls, text)
        line.kind = kind
        return line


def verify_manifest(directory: Path = COMMITTED_DIR) -> list[ManifestProblem]:
    """Problems between the manifest and the files (empty when every listed file is present with
    its sha256, and every committed-stem file is listed), each a :class:`ManifestProblem`."""
    path = directory / MANIFEST.name
    if not path.is_file():
        return [ManifestProblem(f"{path}: missing; run `python -m dartlib artefacts manifest`", "missing")]
    try:
        listed = {e["file"]: e for e in read_manifest(path)["files"]}
    except DamagedFileError as err:
        return [ManifestProblem(str(err), "damaged")]
    problems = []
    for name, entry in listed.items():
        file = directory / name
        if not file.is_file():
            problems.append(ManifestProblem(f"{file}: listed in {path.name} but absent (restore it with "
                                            f"`git checkout -- {file}`)", "missing"))
        elif sha256_of(file) != entry["sha256"]:
            problems.append(ManifestProblem(
                f"{file}: sha256 differs from {path.name} (retrained or damaged; `git checkout -- {file}` "
                "restores the committed one, `python -m dartlib artefacts manifest` records a new one)", "damaged"))
    for file in committed_files(directory):
        if _name(file, directory) not in listed:
            problems.append(ManifestProblem(
                f"{file}: not in {path.name}; commit it and run `python -m dartlib artefacts manifest`, "
                "or delete it if it was trained by mistake", "unlisted"))
    return problems


# The manifests a process has read, keyed by their identity and change stamps
# (:func:`dartlib.data.files.file_stamp`).
_MANIFESTS_SEEN: dict[tuple, dict[str, dict]] = {}


def _listed(manifest: Path) -> dict[str, dict]:
    """{file: entry} of ``manifest`` (:func:`read_manifest`), read once per process while it is unchanged."""
    stamp = file_stamp(manifest)
    if stamp not in _MANIFESTS_SEEN:
        _MANIFESTS_SEEN[stamp] = {e["file"]: e for e in read_manifest(manifest)["files"]}
    return _MANIFESTS_SEEN[stamp]


def manifest_entry(path: Path) -> tuple[Path, dict] | None:
    """The ``MANIFEST.json`` that lists the trained file ``path`` and its entry there: the manifest
    beside it, or for a file in one of :data:`COMMITTED_FOLDERS`, the one in the folder above (which
    names it ``<folder>/<file>``); None when no manifest lists it."""
    path = Path(path)
    places = [(path.parent / MANIFEST.name, path.name)]
    if path.parent.name in COMMITTED_FOLDERS:
        places.append((path.parent.parent / MANIFEST.name, f"{path.parent.name}/{path.name}"))
    for manifest, name in places:
        if manifest.is_file():
            entry = _listed(manifest).get(name)
            if entry is not None:
                return manifest, entry
    return None


def manifest_problem(path: Path) -> str | None:
    """What is wrong with a trained file for the ``MANIFEST.json`` that lists it
    (:func:`manifest_entry`): its sha256 differs from the one recorded (another file copied over it,
    or an edit); None when no manifest lists the file, or the bytes agree. The file is hashed once
    per process (:func:`dartlib.data.files.sha256_once`)."""
    found = manifest_entry(path)
    if found is None or sha256_once(Path(path)) == found[1]["sha256"]:
        return None
    return f"its sha256 differs from the one {found[0].name} records for it (another file under its name, or an edit)"


def damaged_remedy(path: Path) -> str:
    """The remedy for a damaged trained file: a committed one is restored from git; any other is
    trained again when deleted (:data:`~dartlib.data.files.REGENERATE`)."""
    import subprocess

    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent,
                                 capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        tracked = False
    return committed_remedy(path) if tracked else REGENERATE


def refused(path: Path, problem: str, *, anew: str, listed: bool = False) -> DamagedFileError:
    """Set the trained file ``path`` aside (:func:`dartlib.data.files.set_aside`) and return the
    error naming it. The remedy: for a file that disagrees with the manifest (``listed``), restore the
    committed one or record a retrained one; else, for a committed file, restore it from git; for any
    other, ``anew`` (the same command trains it again)."""
    aside = set_aside(path)
    if listed:
        remedy = (f"`git checkout -- {path}` restores the committed file; a file retrained on purpose is recorded by "
                  f"moving {aside.name} back and running `python -m dartlib artefacts manifest`")
    else:
        remedy = damaged_remedy(path)
        remedy = anew if remedy == REGENERATE else remedy
    return DamagedFileError(path, f"{problem}; set aside as {aside.name}", remedy)



def retrained_within_tolerance(*, committed: float, retrained: float, n: int, k: float = 3.0) -> tuple[bool, float]:
    """Whether a retrained model's clean accuracy (%) is within ``k`` binomial standard errors of
    the committed model's, on ``n`` test images; returns (verdict, tolerance in points). Retraining
    on another CPU type changes the weights in their last bits (DESIGN, Portability), which moves a
    short recipe's accuracy by a few tenths; a broken recipe moves it by points."""
    p = committed / 100.0
    tolerance = k * 100.0 * math.sqrt(max(p * (1 - p), 1e-4) / n)
    return abs(retrained - committed) <= tolerance, tolerance
