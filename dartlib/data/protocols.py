"""Label-shift protocols as seeded index arrays over a labelled set (Section 2, Appendix A).

Every function takes the labels of a dataset and returns int64 indices into it; the same
arguments and seed give the same indices. :func:`cached` stores the arrays on disk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dartlib.data.files import CacheDiscardedWarning, DamagedFileError, atomic_path, load_npz
from dartlib.paths import cache_root
from dartlib.registry import Registry


# The test batch of the paper's CIFAR experiments (Appendix A: "to 200 for CIFAR benchmarks"); every
# signature that batches a test stream defaults to it.
TEST_BATCH_SIZE = 200

def _classes(labels: np.ndarray) -> tuple[np.ndarray, int]:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError("labels must be a non-empty 1-d array")
    return labels, int(labels.max()) + 1


def _class_pools(labels: np.ndarray, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The indices of each class, each in its own random order."""
    return [rng.permutation(np.flatnonzero(labels == c)) for c in range(k)]


def long_tailed_counts(k: int, *, n_max: int, rho: float, inverse: bool = False) -> np.ndarray:
    """n_c = floor(n_max * rho^(-c/(K-1))) (Appendix A); inverse: c -> K-1-c."""
    if rho < 1:
        raise ValueError(f"rho must be >= 1, got {rho}")
    exponent = np.arange(k) / (k - 1)
    if inverse:
        exponent = exponent[::-1]
    # The small epsilon keeps exact products (e.g. 1000 * 10^-1 = 100) from flooring to 99.
    return np.floor(n_max * float(rho) ** (-exponent) + 1e-9).astype(np.int64)


def long_tailed(labels: np.ndarray, *, rho: float, inverse: bool = False, seed: int) -> np.ndarray:
    """CIFAR-10-LT style subset: class c keeps floor(n_max * rho^(-c/(K-1))) samples.

    n_max is the per-class count available (the smallest class count, so every class can
    supply its share); the result is shuffled.
    """
    labels, k = _classes(labels)
    rng = np.random.default_rng(seed)
    pools = _class_pools(labels, k, rng)
    n_max = min(len(p) for p in pools)
    counts = long_tailed_counts(k, n_max=n_max, rho=rho, inverse=inverse)
    chosen = np.concatenate([pool[:n] for pool, n in zip(pools, counts)])
    return rng.permutation(chosen).astype(np.int64)


def apportion(probs: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Integer counts summing to ``total`` closest to ``probs * total`` (largest remainder;
    ties between equal remainders broken at random)."""
    exact = np.asarray(probs, dtype=float) * total
    counts = np.floor(exact + 1e-9).astype(np.int64)
    remainder = exact - counts
    short = total - int(counts.sum())
    if short > 0:
        order = np.lexsort((rng.random(len(exact)), -np.round(remainder, 12)))
        counts[order[:short]] += 1
    return counts


def online_imbalance_probs(k: int, *, ir: float) -> tuple[float, float]:
    """(p_max, p_min) = (IR / (IR + K - 1), 1 / (IR + K - 1)) (Section 2)."""
    if ir < 1:
        raise ValueError(f"ir must be >= 1, got {ir}")
    return ir / (ir + k - 1), 1.0 / (ir + k - 1)


def online_imbalance(labels: np.ndarray, *, ir: float, subset_size: int, seed: int) -> np.ndarray:
    """CIFAR-10C-imb style stream: K subsets of ``subset_size`` samples in shuffled order.

    Subset k has majority class k (probability p_max) and every other class at p_min; its
    class counts are the largest-remainder rounding of those probabilities, and its samples
    are shuffled. Samples are drawn without replacement while a class pool lasts; a class
    that runs out starts a fresh random pass over its samples.
    """
    labels, k = _classes(labels)
    rng = np.random.default_rng(seed)
    p_max, p_min = online_imbalance_probs(k, ir=ir)
    pools = _class_pools(labels, k, rng)
    cursor = [0] * k

    def take(c: int, n: int) -> np.ndarray:
        out = []
        while n > 0:
            if cursor[c] == len(pools[c]):
                pools[c], cursor[c] = rng.permutation(pools[c]), 0
            step = min(n, len(pools[c]) - cursor[c])
            out.append(pools[c][cursor[c] : cursor[c] + step])
            cursor[c] += step
            n -= step
        return np.concatenate(out) if out else np.empty(0, dtype=np.int64)

    subsets = []
    for major in rng.permutation(k):
        probs = np.full(k, p_min)
        probs[major] = p_max
        counts = apportion(probs, subset_size, rng)
        subset = np.concatenate([take(c, int(n)) for c, n in enumerate(counts)])
        subsets.append(rng.permutation(subset))
    return np.concatenate(subsets).astype(np.int64)


def dirichlet_stream(
    labels: np.ndarray, *, delta: float, n_chunks: int, seed: int, min_chunk: int = 10, max_tries: int = 10000,
    shuffle_chunks: bool = False,
) -> np.ndarray:
    """NOTE's non-i.i.d. Dirichlet ordering of all indices (used for DART's intermediate batches).

    For each class, shuffle its indices and split them over ``n_chunks`` chunks with
    proportions ~ Dir(delta * 1), giving no more to chunks that already hold N / n_chunks
    samples; redo the pass until every chunk holds at least ``min_chunk`` samples. The stream
    is then the chunks in order, each with its classes in random order as contiguous blocks
    (``shuffle_chunks``: each chunk's images in random order instead, the same chunks).
    Small delta or few chunks give batches dominated by few classes; large values approach
    i.i.d. Returns a permutation of ``arange(len(labels))``.
    """
    labels, k = _classes(labels)
    n = labels.size
    rng = np.random.default_rng(seed)
    cap = n / n_chunks
    for _ in range(max_tries):
        chunks: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(n_chunks)]
        sizes = np.zeros(n_chunks)
        for c in range(k):
            idx = rng.permutation(np.flatnonzero(labels == c))
            props = rng.dirichlet(np.full(n_chunks, delta))
            props = props * (sizes < cap)
            props = props / props.sum() if props.sum() > 0 else np.full(n_chunks, 1.0 / n_chunks)
            cuts = (np.cumsum(props) * len(idx)).astype(np.int64)[:-1]
            for j, part in enumerate(np.split(idx, cuts)):
                chunks[j][c] = part.tolist()
                sizes[j] += len(part)
        if sizes.min() >= min_chunk:
            break
    else:
        raise RuntimeError(f"no Dirichlet split with every chunk >= {min_chunk} samples after {max_tries} tries")
    order: list[int] = []
    for chunk in chunks:
        start = len(order)
        for c in rng.permutation(k):
            order.extend(chunk[c])
        if shuffle_chunks:
            order[start:] = rng.permutation(order[start:]).tolist()
    return np.asarray(order, dtype=np.int64)


def class_balanced(labels: np.ndarray, *, per_class: int | None = None, seed: int) -> np.ndarray:
    """``per_class`` random samples of every class (default: the smallest class count), shuffled.

    This is the intermediate dataset D_int of Section 3.
    """
    labels, k = _classes(labels)
    rng = np.random.default_rng(seed)
    pools = _class_pools(labels, k, rng)
    available = min(len(p) for p in pools)
    n = available if per_class is None else per_class
    if n > available:
        raise ValueError(f"per_class={n} exceeds the smallest class count {available}")
    return rng.permutation(np.concatenate([p[:n] for p in pools])).astype(np.int64)


def iid_order(labels: np.ndarray, *, seed: int) -> np.ndarray:
    """A uniformly random order of all indices (i.i.d. batches are its consecutive slices)."""
    labels, _ = _classes(labels)
    return np.random.default_rng(seed).permutation(labels.size).astype(np.int64)


def batches(order: np.ndarray, *, batch_size: int, drop_last: bool = False) -> list[np.ndarray]:
    """Consecutive slices of ``order`` of ``batch_size``."""
    stop = len(order) - (len(order) % batch_size if drop_last else 0)
    return [order[i : min(i + batch_size, stop)] for i in range(0, stop, batch_size)]


def batch_class_counts(batches: list[np.ndarray], labels: np.ndarray, *, k: int) -> np.ndarray:
    """(number of batches, k): how many images of each of the ``k`` classes every batch holds."""
    return np.array([np.bincount(labels[b], minlength=k) for b in batches])


PROTOCOLS: Registry[Callable[..., np.ndarray]] = Registry(
    "protocol",
    {
        "lt": long_tailed,
        "lt-inverse": lambda labels, **kw: long_tailed(labels, inverse=True, **kw),
        "online-imb": online_imbalance,
        "dirichlet": dirichlet_stream,
        "class-balanced": class_balanced,
        "iid": iid_order,
    },
)


TEST_SHIFTS = ("lt", "none", "natural", "online-imb", "dirichlet")


def test_order(labels: np.ndarray, *, shift: str, shift_param: float | None, seed: int, subset_size: int = 0
               ) -> np.ndarray:
    """The test-stream order of a results-schema ``shift`` with its ``shift_param``:

    - ``lt``: the long-tailed subset (rho = shift_param, CIFAR-10C-LT);
    - ``none``: every image in random order;
    - ``natural``: the same, for a natural-shift test domain whose own class distribution is
      the label shift (PACS, OfficeHome, DomainNet-126);
    - ``online-imb``: K subsets, each with one majority class (IR = shift_param, CIFAR-10C-imb),
      of ``subset_size`` images (0: N / K, the paper's);
    - ``dirichlet``: NOTE's non-i.i.d. order with K chunks (delta = shift_param).
    """
    k = int(np.max(labels)) + 1
    if shift == "lt":
        return long_tailed(labels, rho=float(shift_param), seed=seed)
    if shift in ("none", "natural"):
        return iid_order(labels, seed=seed)
    if shift == "online-imb":
        return online_imbalance(labels, ir=float(shift_param), subset_size=subset_size or len(labels) // k, seed=seed)
    if shift == "dirichlet":
        return dirichlet_stream(labels, delta=float(shift_param), n_chunks=k, seed=seed)
    raise ValueError(f"unknown shift {shift!r} for a test stream; valid: {', '.join(TEST_SHIFTS)}")


def cached(protocol: str, labels: np.ndarray, *, cache_dir: Path | None = None, **params) -> np.ndarray:
    """``PROTOCOLS[protocol](labels, **params)``, stored under ``<data root>/cache/protocols/``.

    The file name hashes the protocol, its parameters and the labels, so a changed input never reads
    a stale file; the file holds that key and the sha256 of the indices, checked when read. A file
    that fails (unreadable, another key, indices that are not its digest's or not indices of
    ``labels``) is discarded with a :class:`~dartlib.data.files.CacheDiscardedWarning` naming it and
    the indices computed again (they are cheap: the file only saves the draw).
    """
    fn = PROTOCOLS[protocol]
    labels = np.asarray(labels)
    key = hashlib.sha256(
        json.dumps({"protocol": protocol, **params}, sort_keys=True, default=str).encode()
        + labels.astype("<i8").tobytes()
    ).hexdigest()[:16]
    folder = cache_dir or cache_root() / "protocols"
    path = folder / f"{protocol}-{key}.npz"
    if path.is_file():
        indices, problem = _read_indices(path, key=key, size=len(labels))
        if not problem:
            return indices
        import warnings

        path.unlink(missing_ok=True)
        warnings.warn(f"{path}: {problem}; discarded, the indices are drawn again (nothing to do)",
                      CacheDiscardedWarning, stacklevel=2)
    indices = fn(labels, **params)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        np.savez(tmp, indices=indices, key=np.array(key), sha256=np.array(_indices_digest(indices)))
    return indices


def _indices_digest(indices: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(indices, dtype="<i8").tobytes()).hexdigest()


def _read_indices(path: Path, *, key: str, size: int) -> tuple[np.ndarray | None, str]:
    """The indices :func:`cached` stored at ``path`` and "", or None and what is wrong with the file."""
    try:
        indices, stored_key, digest = load_npz(path, ("indices", "key", "sha256"))
    except DamagedFileError as err:
        return None, f"is unreadable ({err.problem})"
    if str(stored_key) != key:
        return None, f"was stored under the key {str(stored_key)[:16]}, not {key}"
    if indices.ndim != 1 or indices.dtype.kind not in "iu" or _indices_digest(indices) != str(digest):
        return None, "holds indices that do not match the sha256 stored with them"
    if len(indices) and (indices.min() < 0 or indices.max() >= size):
        return None, f"holds indices outside the {size} labels"
    return indices, ""
