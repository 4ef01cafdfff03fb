"""DART's refinement module, intermediate training and test-time use (Sections 3-4, Appendix B)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from dartlib.dart import refiner as dart
from dartlib.data.dataset import Dataset
from dartlib.dart.intermediate import load_or_train_refiner, refiner_path
from dartlib.dart.refiner_training import train_refiner
from dartlib.models.backbones import small_cnn


def test_batch_statistics_definitions():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    p_bar, d = dart.batch_statistics(logits)
    p = F.softmax(logits, 1)
    torch.testing.assert_close(p_bar, p.mean(0))
    # CE(u, p) = -(1/K) sum_k log p_k, averaged over the batch; a uniform prediction gives log K
    expected = (-(p.log()).mean(1)).mean()
    torch.testing.assert_close(d, expected)
    assert float(dart.batch_statistics(torch.zeros(4, 3))[1]) == pytest.approx(np.log(3))


def test_untrained_residual_module_is_the_identity():
    module = dart.RefinementModule(5, hidden=16)
    w, b = module(torch.full((5,), 0.2), torch.tensor(1.0))
    torch.testing.assert_close(w, torch.eye(5))
    torch.testing.assert_close(b, torch.zeros(5))
    logits = torch.randn(7, 5)
    torch.testing.assert_close(dart.refine(logits, w, b), logits)


def test_ablation_outputs_and_shapes():
    p, d = torch.rand(2, 4).softmax(1), torch.rand(2)
    for outputs in dart.OUTPUTS:
        module = dart.RefinementModule(4, hidden=8, outputs=outputs, parameterisation="direct")
        w, b = module(p, d)
        assert w.shape == (2, 4, 4) and b.shape == (2, 4)
        if outputs == "b":
            torch.testing.assert_close(w, torch.eye(4).expand(2, 4, 4))
        if outputs == "w":
            assert torch.count_nonzero(b) == 0
    module = dart.RefinementModule(4, hidden=8, inputs="pbar")
    assert module.net[0].in_features == 4
    diag = dart.RefinementModule(4, hidden=8, diagonal_only=True, outputs="w", parameterisation="direct")
    w, _ = diag(p, d)
    assert torch.count_nonzero(w - torch.diag_embed(torch.diagonal(w, dim1=-2, dim2=-1))) == 0
    with pytest.raises(ValueError, match="valid: wb, w, b"):
        dart.RefinementModule(4, outputs="wW")


def test_norm_preserving_rescaling():
    original, refined = torch.randn(5, 3), torch.randn(5, 3) * 4
    out = dart.norm_preserving(refined, original)
    torch.testing.assert_close(out.norm(dim=1), original.norm(dim=1))
    torch.testing.assert_close(F.normalize(out, dim=1), F.normalize(refined, dim=1))


@pytest.fixture(scope="module")
def tiny_setup():
    rng = np.random.default_rng(0)
    k, n = 4, 400
    labels = np.repeat(np.arange(k), n // k)
    images = rng.integers(0, 60, size=(n, 32, 32, 3), dtype=np.uint8)
    for c in range(k):  # class-dependent colour so the model can learn something
        images[labels == c, :, :, c % 3] += np.uint8(120 + 40 * (c // 3))
    ds = Dataset("tiny", "train", images, labels.astype(np.int64), tuple("abcd"))
    torch.manual_seed(0)
    model = small_cnn(k, width=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.3)
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    for _ in range(12):
        loss = F.cross_entropy(model(x), torch.from_numpy(labels))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.zero_grad(set_to_none=True)
    model.eval()
    return model, ds


def test_intermediate_training_touches_only_phi(tiny_setup):
    model, ds = tiny_setup
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = dart.DartConfig(epochs=2, batch_size=32, hidden=16, n_dir=5, per_class=100)
    refiner, log = train_refiner(model, ds, config, progress=False)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert all(p.grad is None for p in model.parameters())
    assert len(log) == 2 * (400 // 32) and {"loss_imb", "loss_bal", "lr"} <= set(log[0])
    moved = [p for p in refiner.module.parameters() if p.abs().sum() > 0]
    assert moved, "g_phi did not learn"


def test_refinement_reads_the_frozen_source_model_not_the_adapted_one(tiny_setup):
    model, ds = tiny_setup
    config = dart.DartConfig(epochs=1, batch_size=32, hidden=16, n_dir=5, per_class=100)
    refiner, _ = train_refiner(model, ds, config, progress=False)
    source_logits = torch.randn(16, 4) * 3
    drifted = torch.randn(16, 4) * 3  # the adapted model's logits: differ from the source's
    w, b = refiner.transform(source_logits)
    torch.testing.assert_close(refiner(drifted, source_logits), drifted @ w + b)
    w2, b2 = refiner.transform(drifted)
    assert not torch.allclose(refiner(drifted, source_logits), drifted @ w2 + b2)


def test_dart_split_refines_exactly_the_batches_scored_above_half():
    module = dart.RefinementModule(3, hidden=8, inputs="pbar", parameterisation="direct")
    detector = dart.SeverityDetector()
    with torch.no_grad():
        detector.linear.weight.fill_(-10.0)
        detector.linear.bias.fill_(40.0)  # s > 0.5 exactly when d < 4
    refiner = dart.Refiner(module=module, config=dart.DartConfig(variant="dart-split"), detector=detector)
    confident = torch.tensor([[10.0, 0.0, 0.0]] * 4)  # d = 20/3: no severe shift detected
    unsure = torch.tensor([[0.1, 0.0, 0.0]] * 4)  # d close to log 3: severe shift
    assert float(dart.batch_statistics(confident)[1]) > 4 > float(dart.batch_statistics(unsure)[1])
    logits = torch.randn(4, 3)
    assert refiner.transform(confident) is None
    assert torch.equal(refiner(logits, confident), logits)
    w, b = refiner.transform(unsure)
    torch.testing.assert_close(refiner(logits, unsure), logits @ w + b)
    assert not torch.equal(refiner(logits, unsure), logits)


def test_dart_split_training_and_cache(tiny_setup, tmp_path):
    model, ds = tiny_setup
    config = dart.DartConfig(variant="dart-split", epochs=1, batch_size=32, hidden=16, n_dir=5, per_class=100)
    ckpt = tmp_path / "source.pt"
    ckpt.write_bytes(b"")
    refiner, log = load_or_train_refiner(ckpt, model, ds, config, progress=False)
    assert refiner.detector is not None and "loss_detect" in log[0]
    assert refiner_path(ckpt, config).is_file()
    again, _ = load_or_train_refiner(ckpt, model, ds, config, progress=False)
    for a, b in zip(refiner.module.parameters(), again.module.parameters()):
        assert torch.equal(a, b)


def test_severity_detector_standardises_its_input():
    detector = dart.SeverityDetector()
    d = torch.tensor([6.0, 7.0, 8.0, 9.0])
    assert torch.equal(detector(d), torch.zeros(4))  # starts undecided: s = 0.5
    detector.calibrate(d)
    torch.testing.assert_close(detector.center, d.mean())
    torch.testing.assert_close(detector.scale, d.std())
    with torch.no_grad():
        detector.linear.weight.fill_(-2.0)
    torch.testing.assert_close(detector(d), -2.0 * (d - d.mean()) / d.std())
    restored = dart.SeverityDetector()
    restored.load_state_dict(detector.state_dict())  # the constants travel with the saved refiner
    torch.testing.assert_close(restored(d), detector(d))


def test_dart_split_detector_learns_to_separate_iid_from_dirichlet_batches(tiny_setup):
    """g_phi1 is trained with BCE (i.i.d. -> 0, Dirichlet -> 1); after training it must score
    the training batches it saw on the right side of 0.5, most of them."""
    from dartlib.dart.intermediate_batches import _imbalanced_batches
    from dartlib.dart.refiner_training import CALIBRATION_STEPS
    from dartlib.models.backbones import frozen_bn_adapted
    from dartlib.data.augmentation import to_tensor

    model, ds = tiny_setup
    config = dart.DartConfig(variant="dart-split", epochs=4, batch_size=16, hidden=16, n_dir=5, per_class=100)
    refiner, log = train_refiner(model, ds, config, progress=False)
    detector, frozen = refiner.detector, frozen_bn_adapted(model)
    assert float(detector.scale) > 1e-3 and float(detector.linear.weight.detach()) < 0  # low d = label shift

    def deviations(batches):
        with torch.no_grad():
            return torch.stack([dart.batch_statistics(frozen(to_tensor(ds.images[b])))[1] for b in batches])

    steps = len(ds.labels) // config.batch_size
    dirichlet = deviations(_imbalanced_batches(ds.labels, config, 0, steps))
    iid = deviations(np.array_split(np.random.default_rng(1).permutation(len(ds.labels)), steps))
    seen = torch.cat([dirichlet[:CALIBRATION_STEPS], iid])
    assert float(seen.min()) < float(detector.center) < float(seen.max())  # calibrated on training batches
    correct = torch.cat([torch.sigmoid(detector(dirichlet)) > 0.5, torch.sigmoid(detector(iid)) <= 0.5])
    assert correct.float().mean() >= 0.8
    early = np.mean([e["loss_detect"] for e in log[:steps]])
    late = np.mean([e["loss_detect"] for e in log[-steps:]])
    assert late < early <= np.log(2) + 0.05  # starts at s = 0.5 and improves


def test_refiner_key_ignores_alpha_only_for_dart_split(tiny_setup, tmp_path):
    """DART-split's loss has no alpha-weighted term, so its trained modules and its file do not
    depend on alpha; DART's do."""
    model, ds = tiny_setup
    ckpt = tmp_path / "source.pt"
    small = dict(epochs=1, batch_size=32, hidden=16, n_dir=5, per_class=100)
    split = [dart.DartConfig(variant="dart-split", alpha=a, **small) for a in (0.1, 10.0)]
    assert refiner_path(ckpt, split[0]) == refiner_path(ckpt, split[1])
    assert refiner_path(ckpt, dart.DartConfig(alpha=0.1)) != refiner_path(ckpt, dart.DartConfig(alpha=10.0))
    trained = [train_refiner(model, ds, config, progress=False, max_steps=3)[0] for config in split]
    for a, b in zip([*trained[0].module.parameters(), *trained[0].detector.parameters()],
                    [*trained[1].module.parameters(), *trained[1].detector.parameters()]):
        assert torch.equal(a, b)


def test_config_validation():
    with pytest.raises(ValueError, match="valid: dart, dart-split"):
        dart.DartConfig(variant="dart2")
    with pytest.raises(ValueError, match="valid: dirichlet, unif-lt"):
        dart.DartConfig(sampling="zipf")
    with pytest.raises(ValueError, match="valid: wb, w, b, additive"):
        dart.DartConfig(outputs="both")
    with pytest.raises(ValueError, match="DART only"):
        dart.DartConfig(variant="dart-split", outputs="additive")


def test_additive_variant_keeps_the_parameter_count_and_starts_at_the_identity():
    k, f = 10, 128  # narrow ResNet-26: 128 penultimate features
    affine = dart.RefinementModule(k, hidden=1000)
    hidden = dart.matched_hidden(k, f, hidden=1000)
    additive = dart.AdditiveRefinementModule(k, f, hidden=hidden)
    n_affine = sum(p.numel() for p in affine.parameters())
    n_additive = sum(p.numel() for p in additive.parameters())
    assert n_affine == 122_110 and hidden == 78
    assert abs(n_additive - n_affine) / n_affine < 0.01
    p, d = torch.rand(3, k).softmax(1), torch.rand(3)
    gamma, beta, dw = additive(p, d)
    assert gamma.shape == beta.shape == (3, f) and dw.shape == (3, k, f)
    feats, weight, bias = torch.randn(5, f), torch.randn(k, f), torch.randn(k)
    out = dart.additive_refine(feats, (weight, bias), additive(p[0], d[0]))
    torch.testing.assert_close(out, feats @ weight.T + bias)
    # a non-zero output acts as documented: scaled and shifted features through a shifted head
    g, bt, dW = torch.full((f,), 0.5), torch.full((f,), 0.1), torch.full((k, f), 0.01)
    expected = (feats * 1.5 + 0.1) @ (weight + 0.01).T + bias
    torch.testing.assert_close(dart.additive_refine(feats, (weight, bias), (g, bt, dW)), expected)


def test_additive_variant_trains_only_phi_and_needs_features(tiny_setup, tmp_path):
    model, ds = tiny_setup
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = dart.DartConfig(epochs=1, batch_size=32, hidden=16, n_dir=5, per_class=100, outputs="additive")
    ckpt = tmp_path / "source.pt"
    ckpt.write_bytes(b"")
    refiner, log = load_or_train_refiner(ckpt, model, ds, config, progress=False)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert "loss_bal" in log[0] and refiner.head is not None
    x = torch.from_numpy(ds.images[:32]).permute(0, 3, 1, 2).float() / 255
    with torch.no_grad():
        feats = model.features(x)
        logits = model.head(feats)
    with pytest.raises(ValueError, match="features="):
        refiner(logits, logits)
    refined = refiner(logits, logits, features=feats)
    assert refined.shape == logits.shape and not torch.allclose(refined, logits)
    again, _ = load_or_train_refiner(ckpt, model, ds, config, progress=False)  # from the saved file
    torch.testing.assert_close(again(logits, logits, features=feats), refined)


def test_every_ablation_option_trains(tiny_setup):
    model, ds = tiny_setup
    variants = [dict(inputs="pbar"), dict(outputs="w"), dict(outputs="b"), dict(sampling="unif-lt"),
                dict(parameterisation="direct"), dict(diagonal_only=True), dict(alpha=0.0)]
    for changes in variants:
        config = dart.DartConfig(epochs=1, batch_size=32, hidden=8, n_dir=5, per_class=100, **changes)
        refiner, log = train_refiner(model, ds, config, progress=False, max_steps=3)
        assert len(log) == 3 and np.isfinite([e["loss_imb"] for e in log]).all(), changes
        logits = torch.randn(8, 4)
        assert refiner(logits, logits).shape == (8, 4)


def test_fixed_temperature_scales_the_logits_it_refines():
    module = dart.RefinementModule(3, hidden=4)  # residual and untrained: W = I, b = 0
    refiner = dart.Refiner(module=module, config=dart.DartConfig(), temperature=2.0)
    logits = torch.randn(5, 3)
    torch.testing.assert_close(refiner(logits, logits), 2.0 * logits)


def test_adaptive_temperature_is_the_running_mean_of_appendix_b():
    stats = {"max": 6.0, "sum": 1.0}
    k = 4
    ratio = (1.0 + stats["max"]) / (k + stats["sum"])
    batches = [torch.randn(16, k) * s for s in (1.0, 3.0, 0.5)]
    expected_t = [(float(b.max(1).values.mean()) - float(b.sum(1).mean()) * ratio) / (k * ratio - 1.0) for b in batches]
    for b, t in zip(batches, expected_t):
        assert dart.adaptive_temperature(b, stats) == pytest.approx(t)
    refiner = dart.Refiner(module=dart.RefinementModule(k, hidden=4), config=dart.DartConfig(),
                           adaptive_temperature=True, train_logit_stats=stats)
    for i, b in enumerate(batches):
        out = refiner(b, b)
        scale = 1.0 / np.mean(expected_t[: i + 1])
        torch.testing.assert_close(out, b * scale)
    refiner.reset()
    torch.testing.assert_close(refiner(batches[2], batches[2]), batches[2] / expected_t[2])
    with pytest.raises(ValueError, match="train_logit_stats"):
        dart.adaptive_temperature(batches[0], None)


def test_dart_overhead_benchmark_measures_both_ratios(tiny_setup):
    from dartlib.perf.throughput import dart_overhead

    model, ds = tiny_setup
    config = dart.DartConfig(batch_size=32, hidden=16, n_dir=5, per_class=100)
    table = dart_overhead(model, ds, ds, config=config, test_batch_size=50, n_steps=2, stream_size=100, repeats=1)
    assert list(table.images) == [128, 128, 100, 100]
    assert (table.img_per_s > 0).all()
    assert table.attrs["intermediate_over_forward"] > 0 and table.attrs["dart_over_bnadapt_wall"] > 0


def _state(refiner) -> dict:
    state = {f"module.{k}": v for k, v in refiner.module.state_dict().items()}
    if refiner.detector is not None:
        state.update({f"detector.{k}": v for k, v in refiner.detector.state_dict().items()})
    return state


def test_refiners_trained_in_one_pass_are_those_trained_alone(tiny_setup):
    from dataclasses import replace

    from dartlib.dart.refiner_training import train_refiners

    model, ds = tiny_setup
    base = dart.DartConfig(epochs=2, batch_size=32, hidden=16, n_dir=5, per_class=100)
    configs = [base, replace(base, alpha=1.0, hidden=8), replace(base, variant="dart-split"),
               replace(base, outputs="additive"), replace(base, inputs="pbar", outputs="w"), replace(base, epochs=1)]
    together = train_refiners(model, ds, configs, progress=False)
    for config, (refiner, log) in zip(configs, together):
        alone, alone_log = train_refiner(model, ds, config, progress=False)
        assert log == alone_log, config
        a, b = _state(refiner), _state(alone)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), config
    assert [len(log) for _, log in together] == [24] * 5 + [12]  # the 1-epoch one stops on its own schedule
    assert together[-1][1][-1]["lr"] < together[0][1][11]["lr"]
    with pytest.raises(ValueError, match="must share seed, per_class, delta, n_dir, batch_size, sampling"):
        train_refiners(model, ds, [base, replace(base, batch_size=16)], progress=False)


def test_load_or_train_refiners_trains_what_is_missing_once_per_batch_stream(tiny_setup, tmp_path, monkeypatch):
    from dataclasses import replace

    from dartlib.dart import intermediate

    model, ds = tiny_setup
    ckpt = tmp_path / "source.pt"
    ckpt.write_bytes(b"")
    base = dart.DartConfig(epochs=1, batch_size=32, hidden=16, n_dir=5, per_class=100)
    saved, _ = load_or_train_refiner(ckpt, model, ds, base, progress=False)
    passes = []
    real = intermediate._train_pass
    monkeypatch.setattr(intermediate, "_train_pass",
                        lambda m, d, configs, **kw: passes.append(len(configs)) or real(m, d, configs, **kw))
    split = replace(base, variant="dart-split")
    configs = [base, replace(base, alpha=1.0), split, replace(split, alpha=5.0), replace(base, sampling="unif-lt")]
    out = intermediate.load_or_train_refiners(ckpt, model, ds, configs, progress=False)
    # the saved one is read back; the two split configs are one file (no alpha in Algorithm 3)
    assert sorted(passes) == [1, 2]
    assert all(refiner_path(ckpt, c).is_file() for c in configs)
    assert all(torch.equal(a, b) for a, b in zip(_state(out[0][0]).values(), _state(saved).values()))
    assert out[2][1] == out[3][1]
    blob = torch.load(refiner_path(ckpt, configs[1]), weights_only=False)
    assert blob["meta"]["trained_with"] == 2 and blob["meta"]["seconds"] > 0
    intermediate.load_or_train_refiners(ckpt, model, ds, configs, progress=False)
    assert sorted(passes) == [1, 2]  # nothing left to train


def test_shared_pass_benchmark_times_both_ways(tiny_setup):
    from dataclasses import replace

    from dartlib.perf.throughput import shared_pass_speedup

    model, ds = tiny_setup
    base = dart.DartConfig(epochs=1, batch_size=32, hidden=16, n_dir=5, per_class=100)
    table = shared_pass_speedup(model, ds, configs=[base, replace(base, alpha=1.0)], n_steps=2, repeats=1)
    assert list(table.measure) == ["2 refiners one after the other", "2 refiners in one pass"]
    assert (table.seconds > 0).all() and table.attrs["speedup"] == table.seconds[0] / table.seconds[1]


def test_an_interrupted_refiner_pass_resumes_from_its_last_epoch_bit_identically(tiny_setup, tmp_path, monkeypatch):
    from dataclasses import replace

    from dartlib.dart import intermediate, refiner_training

    model, ds = tiny_setup
    ckpt = tmp_path / "source.pt"
    ckpt.write_bytes(b"")
    base = dart.DartConfig(epochs=3, batch_size=32, hidden=16, n_dir=5, per_class=100)
    configs = [base, replace(base, variant="dart-split"), replace(base, outputs="additive", epochs=2)]
    uninterrupted = refiner_training.train_refiners(model, ds, configs, progress=False)
    steps, real_update = [], refiner_training._Learner.update

    def update_until_step_20(self, epoch, batch):  # 12 steps per epoch: dies in the second epoch
        steps.append(epoch)
        if len(steps) > 20 * len(configs):
            raise KeyboardInterrupt
        real_update(self, epoch, batch)

    monkeypatch.setattr(refiner_training._Learner, "update", update_until_step_20)
    with pytest.raises(KeyboardInterrupt):
        intermediate.load_or_train_refiners(ckpt, model, ds, configs, progress=False)
    partial = intermediate.pass_path(ckpt, [refiner_path(ckpt, c) for c in configs])
    saved = torch.load(partial, weights_only=False)
    partial_bytes = partial.read_bytes()
    assert saved["epochs_done"] == 1 and [s["step"] for s in saved["learners"]] == [12, 12, 12]
    assert not any(refiner_path(ckpt, c).is_file() for c in configs)

    monkeypatch.setattr(refiner_training._Learner, "update", real_update)
    steps.clear()
    resumed = intermediate.load_or_train_refiners(ckpt, model, ds, configs, progress=False)
    for (a, a_log), (b, b_log) in zip(uninterrupted, resumed):
        assert a_log == b_log
        sa, sb = _state(a), _state(b)
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not partial.exists()  # removed once the refiners are saved

    # a state saved by another pass (here: another source model) is not resumed
    other = [replace(base, alpha=2.0)]
    other_partial = intermediate.pass_path(ckpt, [refiner_path(ckpt, c) for c in other])
    torch.save({**saved, "identity": {**saved["identity"], "model_digest": "another model"}}, other_partial)
    fresh = intermediate.load_or_train_refiners(ckpt, model, ds, other, progress=False)
    alone, alone_log = train_refiner(model, ds, other[0], progress=False)
    assert fresh[0][1] == alone_log and len(alone_log) == 36

    # a damaged state (cut short) is set aside with a warning: the pass starts over
    damaged = [replace(base, alpha=3.0, epochs=1)]
    damaged_partial = intermediate.pass_path(ckpt, [refiner_path(ckpt, c) for c in damaged])
    damaged_partial.write_bytes(partial_bytes[: len(partial_bytes) // 2])
    with pytest.warns(UserWarning, match=r"pass-.*partial\.pt.*starts over"):
        out = intermediate.load_or_train_refiners(ckpt, model, ds, damaged, progress=False)
    assert out[0][1] == train_refiner(model, ds, damaged[0], progress=False)[1]
    assert not damaged_partial.exists()
