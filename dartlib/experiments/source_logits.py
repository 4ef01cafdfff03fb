"""f_theta0_bar's logits memoised per test batch, shared by every cell of a grid (Section 3,
"Utilizing g_phi at test-time": W_B and b_B are read from the frozen BN-adapted source model's
logits of the batch, which every method with DART computes alike), and kept on disk between runs
only under checks that it cannot lie. The engine's contexts hold one
(:meth:`dartlib.experiments.engine.TestTimeContext.shared_source`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch import nn

from dartlib.data.files import CacheDiscardedWarning
from dartlib.models.artefacts import weights_digest
from dartlib.models.backbones import frozen_bn_adapted

MEMO_SPOT_CHECKS = 3  # entries read from a memo file that are recomputed and compared, per process


class SharedSourceLogits:
    """f_theta0_bar (the frozen BN-adapted source model) with its logits memoised per test batch.

    In BN-adapt mode the logits are a pure function of the batch, so every cell of a grid that
    sees the same batch (each method with DART) can share one forward pass. Keys
    are digests of the batch's bytes; values are bit-identical to a fresh forward pass.

    A memo kept on disk (:meth:`save`) cannot lie: its file records what made it (the source
    weights' digest, the torch version, the thread count, the engine's revision) and a sha256 of
    its contents, both checked when it is read (:meth:`load`); and the first
    :data:`MEMO_SPOT_CHECKS` entries of the file that a process uses are recomputed and compared.
    A file that fails any check is discarded (deleted, its entries dropped) with one
    :class:`CacheDiscardedWarning` naming it, and the memo is rebuilt from fresh forwards; so no
    result is computed from an entry that a check could refute.
    """

    def __init__(self, source: nn.Module, *, revision: int) -> None:
        self.frozen = frozen_bn_adapted(source)
        # the engine's revision (dartlib.experiments.engine.ENGINE_REVISION): what made the entries
        self.revision = revision
        self._memo: dict[str, torch.Tensor] = {}
        self._from_file: set[str] = set()  # keys read from a memo file, not yet vouched for by a spot check
        self._checked = 0
        self._directory: Path | None = None
        self.on_disk = 0  # entries known to be in the memo's file (0 after a discard: it is written anew)
        self.hits = 0
        # Set by a device-resident cell before each batch (dartlib.experiments.engine.evaluate_cell):
        # the stream and the batch's index name the batch, so that its bytes are not read back to be hashed.
        self.key: str | None = None

    def to(self, device: str | torch.device) -> SharedSourceLogits:
        self.frozen.to(device)
        return self

    def __len__(self) -> int:
        return len(self._memo)

    def store_path(self, directory: Path) -> Path:
        """Where :meth:`save` keeps this memo: named by the source weights, the torch version and
        thread count (a forward's last bits may depend on both), so a file only ever serves the
        computation that made it."""
        tag = f"{weights_digest(self.frozen)[:16]}-torch{torch.__version__}-t{torch.get_num_threads()}"
        return directory / f"source-logits-{tag}.pt"

    def made_by(self) -> dict:
        """What this memo's entries are a function of: the frozen model's weights, the torch version,
        the thread count and the engine's revision (stored with the file, compared when read)."""
        return {"source": weights_digest(self.frozen), "torch": str(torch.__version__),
                "threads": torch.get_num_threads(), "engine": self.revision}

    @staticmethod
    def contents_digest(memo: dict[str, torch.Tensor]) -> str:
        """sha256 over the memo's keys and the bytes of its tensors, in key order."""
        h = hashlib.sha256()
        for key in sorted(memo):
            value = memo[key].detach().cpu().contiguous()
            h.update(f"{key}|{value.dtype}|{tuple(value.shape)}\n".encode())
            h.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
        return h.hexdigest()

    def save(self, directory: Path) -> Path:
        """Write the memo (CPU tensors) to :meth:`store_path`, atomically, merged under a lock with
        the entries other processes saved there meanwhile, with :meth:`made_by` and the digest of
        its contents; returns the path."""
        from dartlib.models.checkpoints import save_weights

        path = self.store_path(directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked(path):
            self._read(path)
            memo = {k: v.cpu() for k, v in self._memo.items()}
            save_weights({"memo": memo, "made_by": self.made_by(), "sha256": self.contents_digest(memo)}, path=path)
            self.on_disk = len(memo)
        return path

    def load(self, directory: Path) -> int:
        """Add the entries :meth:`save` wrote for this source, torch version and thread count
        (none where there is no such file, or where the file fails its checks: it is then
        discarded with one warning); returns how many were read."""
        path = self.store_path(directory)
        self._directory = directory
        if not path.is_file():
            return 0
        with self._locked(path):
            return self._read(path)

    @staticmethod
    def _locked(path: Path):
        from dartlib.data.files import exclusive_lock

        return exclusive_lock(path)

    def _read(self, path: Path) -> int:
        """The entries of ``path`` not yet in memory, after checking what made the file and its
        contents' digest (the caller holds the file's lock); a file that fails is discarded."""
        from dartlib.data.files import DamagedFileError
        from dartlib.models.checkpoints import load_weights

        if not path.is_file():
            return 0
        try:
            blob = load_weights(path, required=("memo",))
        except DamagedFileError as err:
            return self._discard(path, f"is unreadable ({err.problem})")
        memo, made_by = blob["memo"], blob.get("made_by")
        if made_by != self.made_by():
            what = ("holds no record of what made it" if made_by is None else
                    f"was made by {made_by}, not by this computation's {self.made_by()}")
            return self._discard(path, what)
        if blob.get("sha256") != self.contents_digest(memo):
            return self._discard(path, "has contents that do not match the sha256 stored with them (altered or damaged "
                                       "after it was written)")
        device = next(self.frozen.parameters()).device
        new = {k: v.to(device) for k, v in memo.items() if k not in self._memo}
        self._memo.update(new)
        self._from_file.update(new)
        self.on_disk = len(memo)
        return len(memo)

    def _discard(self, path: Path, problem: str) -> int:
        """Delete the memo file ``path`` and drop the entries read from it, with one warning."""
        import warnings

        for key in self._from_file:
            self._memo.pop(key, None)
        self._from_file.clear()
        self.on_disk = 0
        path.unlink(missing_ok=True)
        warnings.warn(f"{path}: the shared source-logits memo {problem}; discarded: it is rebuilt from fresh "
                      f"forward passes (nothing to do)", CacheDiscardedWarning, stacklevel=4)
        return 0

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.key is not None:
            key = f"{tuple(x.shape)}|{x.dtype}|{x.device}|stream {self.key}"
        else:
            data = x.detach().contiguous().cpu().numpy()
            key = f"{tuple(x.shape)}|{x.dtype}|{x.device}|{hashlib.blake2b(data.tobytes(), digest_size=16).hexdigest()}"
        if key in self._memo and key in self._from_file and self._checked < MEMO_SPOT_CHECKS:
            fresh = self.frozen(x)  # the spot check: a file's entry is used only once a fresh forward agrees
            stored = self._memo[key]
            if stored.shape == fresh.shape and torch.allclose(stored.float(), fresh.float(), rtol=1e-4, atol=1e-4):
                self._checked += 1
            else:
                path = self.store_path(self._directory) if self._directory is not None else Path("memo")
                gap = (stored.float() - fresh.float()).abs().max().item() if stored.shape == fresh.shape else None
                if self._directory is not None:
                    with self._locked(path):
                        self._discard(path, f"gave logits {'of another shape' if gap is None else f'{gap:.3g} away'} "
                                            f"from a fresh forward pass of the same batch (spot check)")
                else:
                    self._discard(path, "failed its spot check")
                self._memo[key] = fresh
                return fresh
        if key in self._memo:
            self.hits += 1
        else:
            self._memo[key] = self.frozen(x)
        return self._memo[key]
