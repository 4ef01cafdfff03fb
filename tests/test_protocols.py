"""Label-shift protocols: exact per-class counts, permutations, determinism, caching."""

from __future__ import annotations

import numpy as np
import pytest

from dartlib.data import protocols as P

CIFAR10_TEST = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 1000))
CIFAR100_TEST = np.random.default_rng(1).permutation(np.repeat(np.arange(100), 100))


@pytest.mark.parametrize(
    "rho,expected",
    [
        (10, [1000, 774, 599, 464, 359, 278, 215, 166, 129, 100]),
        (100, [1000, 599, 359, 215, 129, 77, 46, 27, 16, 10]),
        (1, [1000] * 10),
    ],
)
def test_long_tailed_counts(rho, expected):
    idx = P.long_tailed(CIFAR10_TEST, rho=rho, seed=0)
    assert np.bincount(CIFAR10_TEST[idx], minlength=10).tolist() == expected
    inv = P.long_tailed(CIFAR10_TEST, rho=rho, inverse=True, seed=0)
    assert np.bincount(CIFAR10_TEST[inv], minlength=10).tolist() == expected[::-1]
    assert len(np.unique(idx)) == len(idx)


def test_long_tailed_is_shuffled_and_seeded():
    a = P.long_tailed(CIFAR10_TEST, rho=100, seed=3)
    assert np.array_equal(a, P.long_tailed(CIFAR10_TEST, rho=100, seed=3))
    assert not np.array_equal(a, P.long_tailed(CIFAR10_TEST, rho=100, seed=4))
    # shuffled: the head class is spread over the whole stream, not front-loaded
    head = np.flatnonzero(CIFAR10_TEST[a] == 0)
    assert head.min() < 50 and head.max() > len(a) - 50


# (K, subset size, IR) -> sorted class counts of every subset: majority first, then the minors
ONLINE_CASES = {
    (10, 1000, 1): [100] * 10,
    (10, 1000, 5): [357] + [72] * 4 + [71] * 5,
    (10, 1000, 20): [690] + [35] * 4 + [34] * 5,
    (10, 1000, 50): [847] + [17] * 9,
    (10, 1000, 5000): [999, 1] + [0] * 8,
    (100, 100, 1): [1] * 100,
    (100, 100, 5): [4] + [1] * 96 + [0] * 3,
    (100, 100, 20): [16] + [1] * 84 + [0] * 15,
    (100, 100, 50): [33] + [1] * 67 + [0] * 32,
    (100, 100, 5000): [99, 1] + [0] * 98,
}


@pytest.mark.parametrize("k,size,ir", list(ONLINE_CASES))
def test_online_imbalance_counts(k, size, ir):
    labels = CIFAR10_TEST if k == 10 else CIFAR100_TEST
    idx = P.online_imbalance(labels, ir=ir, subset_size=size, seed=0)
    assert len(idx) == k * size
    majors = []
    for s in range(k):
        counts = np.bincount(labels[idx[s * size : (s + 1) * size]], minlength=k)
        major = int(np.argmax(counts))
        majors.append(major)
        minors = sorted(np.delete(counts, major).tolist(), reverse=True)
        assert [int(counts[major])] + minors == ONLINE_CASES[(k, size, ir)]
    if ir > 1:
        assert sorted(majors) == list(range(k))
        assert majors != list(range(k)), "subsets must come in shuffled order"


def test_online_imbalance_without_replacement_while_pool_allows():
    for ir in (50, 20):
        idx = P.online_imbalance(CIFAR10_TEST, ir=ir, subset_size=1000, seed=0)
        per_class_draws = np.bincount(CIFAR10_TEST[idx], minlength=10)
        # a sample repeats only when its class pool (1,000) is exhausted
        assert len(np.unique(idx)) == 10000 - (per_class_draws - 1000).clip(min=0).sum()
    assert per_class_draws.max() > 1000  # IR 20: 690 + 9 * ~34.5 > 1000, some reuse is unavoidable
    idx = P.online_imbalance(CIFAR10_TEST, ir=50, subset_size=1000, seed=0)
    assert len(np.unique(idx)) == len(idx)  # IR 50: 847 + 9 * 17 = 1000 per class exactly


def test_online_imbalance_probabilities():
    assert P.online_imbalance_probs(10, ir=5) == pytest.approx((5 / 14, 1 / 14))


def _max_class_fraction(labels, order, batch_size=64):
    return np.mean([np.bincount(labels[b]).max() / len(b) for b in P.batches(order, batch_size=batch_size, drop_last=True)])


def test_dirichlet_stream_is_a_permutation_and_far_from_iid():
    labels = np.random.default_rng(2).permutation(np.repeat(np.arange(10), 2000))
    order = P.dirichlet_stream(labels, delta=10, n_chunks=100, seed=0)
    assert np.array_equal(np.sort(order), np.arange(len(labels)))
    iid = P.iid_order(labels, seed=0)
    assert _max_class_fraction(labels, order) > 2 * _max_class_fraction(labels, iid)
    assert np.array_equal(order, P.dirichlet_stream(labels, delta=10, n_chunks=100, seed=0))
    # smaller delta: even less balanced batches
    sharper = P.dirichlet_stream(labels, delta=0.1, n_chunks=100, seed=0)
    assert _max_class_fraction(labels, sharper) > _max_class_fraction(labels, order)


def test_class_balanced_and_batches():
    labels = np.concatenate([np.zeros(30, int), np.ones(50, int), np.full(40, 2)])
    idx = P.class_balanced(labels, per_class=20, seed=0)
    assert np.bincount(labels[idx]).tolist() == [20, 20, 20]
    assert np.bincount(labels[P.class_balanced(labels, seed=0)]).tolist() == [30, 30, 30]
    with pytest.raises(ValueError, match="smallest class count 30"):
        P.class_balanced(labels, per_class=31, seed=0)
    b = P.batches(np.arange(10), batch_size=4)
    assert [len(x) for x in b] == [4, 4, 2]
    assert [len(x) for x in P.batches(np.arange(10), batch_size=4, drop_last=True)] == [4, 4]


def test_cache_round_trip_and_registry(tmp_path):
    a = P.cached("lt", CIFAR10_TEST, cache_dir=tmp_path, rho=10, seed=0)
    files = list(tmp_path.glob("lt-*.npz"))
    assert len(files) == 1
    with np.load(files[0]) as stored:
        assert np.array_equal(a, stored["indices"]) and files[0].name == f"lt-{stored['key']}.npz"
    assert np.array_equal(a, P.cached("lt", CIFAR10_TEST, cache_dir=tmp_path, rho=10, seed=0))
    P.cached("lt", CIFAR10_TEST, cache_dir=tmp_path, rho=10, seed=1)
    assert len(list(tmp_path.glob("lt-*.npz"))) == 2
    with pytest.raises(KeyError, match="valid names: lt, lt-inverse, online-imb, dirichlet"):
        P.cached("zipf", CIFAR10_TEST, cache_dir=tmp_path)
