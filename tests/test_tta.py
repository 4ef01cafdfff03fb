"""Test-time methods: what they change, that they optimise, and that W = I, b = 0 is a no-op."""

from __future__ import annotations

import copy

import pytest
import torch

from dartlib import tta
from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.models.backbones import bn_layers, small_cnn


def _model():
    torch.manual_seed(0)
    model = small_cnn(5, width=4)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(32, 3, 32, 32))
    return model.eval()


def _identity_refiner(k=5):
    return Refiner(module=RefinementModule(k, hidden=8), config=DartConfig())


def _batches(n=3):
    g = torch.Generator().manual_seed(1)
    return [torch.rand(16, 3, 32, 32, generator=g) for _ in range(n)]


def _bn_affine_names(model):
    names = set()
    for name, module in model.named_modules():
        if module in set(bn_layers(model)):
            names |= {f"{name}.weight", f"{name}.bias"}
    return names


@pytest.mark.parametrize("name", ["noadapt", "bnadapt", "lame"])
def test_methods_without_updates_change_nothing(name):
    model = _model()
    before = copy.deepcopy(model.state_dict())
    adapter = tta.make(name, model)
    for x in _batches():
        adapter(x)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items() if "num_batches" not in k)


OPTIONS = {"pl": {"threshold": 0.0}, "sar": {"margin_factor": 2.0}, "memo": {"n_augmentations": 2}}


@pytest.mark.parametrize("name", ["tent", "pl", "sar", "delta", "ods", "memo", "roid"])
def test_gradient_methods_change_only_bn_affine(name):
    model = _model()
    before = copy.deepcopy(model.state_dict())
    options = OPTIONS.get(name, {})
    adapter = tta.make(name, model, **options)
    for x in _batches():
        adapter(x)
    after = model.state_dict()
    changed = {k for k, v in before.items() if k in after and not torch.equal(v, after[k])}
    assert changed and changed <= _bn_affine_names(_model())


def test_tent_loss_decreases_on_a_repeated_batch():
    model = _model()
    adapter = tta.make("tent", model, lr=1e-2)
    x = _batches(1)[0]
    first = float(tta.entropy(adapter(x)))
    for _ in range(10):
        adapter(x)
    with torch.no_grad():
        last = float(tta.entropy(model(x)))
    assert last < first


def test_pl_loss_decreases_on_a_repeated_batch():
    model = _model()
    adapter = tta.make("pl", model, lr=1e-2, threshold=0.0)
    x = _batches(1)[0]
    with torch.no_grad():
        labels = model(x).argmax(1)
        first = float(torch.nn.functional.cross_entropy(model(x), labels))
    for _ in range(10):
        adapter(x)
    with torch.no_grad():
        assert float(torch.nn.functional.cross_entropy(model(x), labels)) < first


@pytest.mark.parametrize("name", ["noadapt", "bnadapt", "tent", "pl", "note", "delta", "ods", "lame", "sar", "memo", "roid"])
def test_identity_refiner_reproduces_the_method_bit_for_bit(name):
    options = {**OPTIONS, "pl": {"threshold": 0.2}, "note": {"memory": 8}}.get(name, {})
    plain_model, refined_model = _model(), _model()
    plain = tta.make(name, plain_model, **options)
    refined = tta.make(name, refined_model, refiner=_identity_refiner(), **options)
    for x in _batches():
        assert torch.equal(plain(x), refined(x))
    assert all(torch.equal(v, refined_model.state_dict()[k]) for k, v in plain_model.state_dict().items())


def test_refiner_changes_predictions_and_the_loss_input():
    refiner = _identity_refiner()
    with torch.no_grad():
        refiner.module.net[2].bias[-5:] = torch.tensor([3.0, 0, 0, 0, 0])  # b favours class 0
    plain_model, refined_model = _model(), _model()
    plain, dart = tta.make("tent", plain_model), tta.make("tent", refined_model, refiner=refiner)
    x = _batches(1)[0]
    out_plain, out_dart = plain(x), dart(x)
    assert (out_dart.argmax(1) == 0).sum() > (out_plain.argmax(1) == 0).sum()
    assert not all(torch.equal(v, refined_model.state_dict()[k]) for k, v in plain_model.state_dict().items())


def test_reset_restores_the_source_model():
    model = _model()
    before = copy.deepcopy(model.state_dict())
    adapter = tta.make("tent", model, lr=1e-2)
    adapter(_batches(1)[0])
    adapter.reset()
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_option_errors_are_clear():
    with pytest.raises(KeyError, match="valid names: noadapt, bnadapt, tent, pl, note, delta, ods, lame, sar, memo, roid"):
        tta.make("cotta", _model())
    with pytest.raises(ValueError, match="valid: adam, sgd"):
        tta.make("tent", _model(), optimizer="rmsprop")
    with pytest.raises(ValueError, match="valid: sum, mean"):
        tta.make("tent", _model(), entropy_normalisation="max")
    with pytest.raises(TypeError, match="bnadapt: .*unexpected keyword argument 'lr'"):
        tta.make("bnadapt", _model(), lr=0.1)
    with pytest.raises(ValueError, match="threshold"):
        tta.make("pl", _model(), threshold=1.5)
    with pytest.raises(ValueError, match="valid: arithmetic, geometric"):
        tta.make("ods", _model(), combination="harmonic")
    with pytest.raises(ValueError, match="valid: batch, source"):
        tta.make("memo", _model(), bn="group")
    with pytest.raises(ValueError, match="memory must be positive"):
        tta.make("note", _model(), memory=0)


def test_entropy_normalisations():
    logits = torch.randn(4, 5)
    assert float(tta.entropy(logits, normalisation="mean")) == pytest.approx(float(tta.entropy(logits)) / 5)


def test_lame_knn_and_fixed_point():
    from dartlib.tta.lame import knn_affinity, laplacian_solution

    feats = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    w = knn_affinity(feats, k=1)
    assert w.tolist() == [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]
    probs = torch.tensor([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.45, 0.55]])
    y = laplacian_solution(probs, w)
    assert y.argmax(1).tolist() == [0, 0, 1, 1]  # each point follows its confident neighbour
    torch.testing.assert_close(y, torch.softmax(torch.log(probs + 1e-10) + w @ y, 1), atol=1e-5, rtol=0)


def test_sar_skips_the_last_stage_lowers_the_loss_and_resets():
    from dartlib.models.backbones import resnet26

    torch.manual_seed(0)
    model = resnet26(5, width=2).eval()
    before = copy.deepcopy(model.state_dict())
    adapter = tta.make("sar", model, lr=1e-2, margin_factor=2.0)
    x = _batches(1)[0]
    with torch.no_grad():
        first = float(tta.entropy(model(x)))
    for _ in range(5):
        adapter(x)
    changed = {k for k, v in before.items() if not torch.equal(v, model.state_dict()[k])}
    assert changed and not any(k.startswith("layer4.") for k in changed)
    assert changed <= _bn_affine_names(model)
    with torch.no_grad():
        assert float(tta.entropy(model(x))) < first
    resetting = tta.make("sar", resnet26(5, width=2).eval(), lr=1e-2, margin_factor=2.0, reset=True, reset_constant=10.0)
    resetting(x)
    assert resetting.ema is None  # the moving average fell below the constant: back to the source


def test_delta_tbr_and_dot():
    from dartlib.tta.delta import TBRNorm

    model = _model()
    adapter = tta.make("delta", model, lr=1e-2)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    x = _batches(1)[0]
    out = adapter(x)
    tbr = next(m for m in model.modules() if isinstance(m, TBRNorm))
    assert bool(tbr.initialised)
    q = adapter.q_hat
    expected = 0.95 * torch.full((5,), 0.2) + 0.05 * torch.softmax(out, 1).mean(0)
    torch.testing.assert_close(q, expected)
    with torch.no_grad():
        first = float(tta.entropy(model(x)))
    for _ in range(10):
        adapter(x)
    with torch.no_grad():
        assert float(tta.entropy(model(x))) < first
    adapter.reset()
    assert adapter.q_hat is None and not bool(tbr.initialised)
    source = _model().state_dict()
    assert all(torch.equal(source[k], v) for k, v in model.state_dict().items() if k in source)


def test_iabn_limits_are_bn_and_instance_norm():
    from dartlib.tta.note import IABN2d

    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
        bn.running_var.copy_(torch.tensor([1.5, 0.5, 2.0]))
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.0, 1.0, -1.0]))
    bn.eval()
    x = torch.randn(4, 3, 5, 5) * 2 + 1
    wide = IABN2d(bn, k=1e9)  # never trusts the instance statistics: plain BN
    torch.testing.assert_close(wide(x), bn(x))
    narrow = IABN2d(bn, k=0.0)  # always trusts them: instance normalisation (unbiased variance)
    var, mu = torch.var_mean(x, dim=(2, 3), keepdim=True, unbiased=True)
    expected = (x - mu) / torch.sqrt(var + bn.eps) * bn.weight.view(1, 3, 1, 1) + bn.bias.view(1, 3, 1, 1)
    torch.testing.assert_close(narrow(x), expected)


def test_prediction_balanced_memory():
    from dartlib.tta.note import PredictionBalancedMemory

    memory = PredictionBalancedMemory(4, 2, seed=0)
    for i in range(4):
        assert memory.add(torch.full((1,), float(i)), 0)
    assert memory.counts() == [4, 0]
    assert memory.add(torch.zeros(1), 1)  # a minority prediction evicts a majority sample
    assert memory.counts() == [3, 1] and len(memory) == 4
    kept = sum(memory.add(torch.zeros(1), 0) for _ in range(200))  # majority: reservoir sampling
    assert memory.counts() == [3, 1] and 0 < kept < 40
    assert memory.batch().shape == (4, 1)


def test_note_adapts_on_its_memory():
    from dartlib.tta.note import IABN2d

    model = _model()
    before = copy.deepcopy(model.state_dict())
    adapter = tta.make("note", model, memory=16, lr=1e-2)
    assert any(isinstance(m, IABN2d) for m in model.modules())
    x = _batches(1)[0]
    adapter(x)
    assert len(adapter.memory) == 16
    after = {k.replace(".bn.", "."): v for k, v in model.state_dict().items()}
    changed = {k for k, v in before.items() if not torch.equal(v, after[k])}
    affine = _bn_affine_names(_model())
    assert changed & affine and all(k in affine or "running" in k for k in changed if "num_batches" not in k)
    model.train()
    with torch.no_grad():
        first = float(tta.entropy(model(adapter.memory.batch())))
    for _ in range(10):
        adapter(x)
    model.train()
    with torch.no_grad():
        assert float(tta.entropy(model(adapter.memory.batch()))) < first


def test_note_with_dart_refines_the_memory_labels():
    refiner = _identity_refiner()
    with torch.no_grad():
        refiner.module.net[2].bias[-5:] = torch.tensor([0, 0, 0, 9.0, 0])  # b forces class 3
    adapter = tta.make("note", _model(), refiner=refiner, memory=16, source=_model())
    out = adapter(_batches(1)[0])
    assert adapter.memory.counts()[3] == 16 and out.shape == (16, 5)  # what it reports: tests/test_baselines.py


def test_ods_tracks_the_label_distribution_and_lowers_its_loss():
    model = _model()
    adapter = tta.make("ods", model, lr=1e-2)
    x = _batches(1)[0]
    out = adapter(x)
    torch.testing.assert_close(out.exp().sum(1), torch.ones(len(x)))
    w = adapter.label_distribution
    assert w.shape == (5,) and float(w.sum()) == pytest.approx(1.0, abs=1e-5)
    with torch.no_grad():
        first = float(tta.entropy(model(x)))
    for _ in range(10):
        adapter(x)
    with torch.no_grad():
        assert float(tta.entropy(model(x))) < first


def test_memo_marginal_entropy_and_episodic_reset():
    from dartlib.tta.memo import marginal_entropy

    logits = torch.randn(6, 5)
    torch.testing.assert_close(marginal_entropy(torch.stack([logits, logits, logits])), tta.entropy(logits))
    model = _model()
    before = copy.deepcopy(model.state_dict())
    adapter = tta.make("memo", model, bn="source", n_augmentations=2, lr=1e-2)
    assert adapter.episodic
    x = _batches(1)[0]
    adapter(x)
    once = copy.deepcopy(model.state_dict())
    assert not all(torch.equal(v, once[k]) for k, v in before.items())
    adapter(x)  # starts again from the source weights (the stored statistics never move)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items() if "running" in k)
    continual = tta.make("memo", _model(), n_augmentations=4, lr=1e-2)
    assert not continual.episodic


def test_roid_pieces():
    from dartlib.tta.roid import prior_correction, soft_likelihood_ratio

    logits = torch.tensor([[4.0, 0.0], [0.0, 1.0]])
    p = torch.softmax(logits, 1).clamp(max=0.99)
    expected = -(p * torch.log(p / (1 - p) + 1e-5)).sum(1)
    torch.testing.assert_close(soft_likelihood_ratio(logits), expected)
    prior = torch.softmax(logits, 1).mean(0)
    smooth = 0.5 / float(prior.max())
    torch.testing.assert_close(prior_correction(logits), logits * (prior + smooth) / (1 + 2 * smooth))
    model = _model()
    before = copy.deepcopy(model.state_dict())
    anchored = tta.make("roid", model, ensemble=0.0, lr=1e-2)  # full ensembling to the source undoes each step
    anchored(_batches(1)[0])
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_iabn_fine_tuning_is_saved_and_reused(tmp_path):
    import numpy as np

    from dartlib.data.dataset import Dataset
    from dartlib.tta.note import IABN2d, iabn_path, load_or_finetune_iabn

    rng = np.random.default_rng(0)
    train = Dataset("tiny", "train", rng.integers(0, 255, size=(64, 32, 32, 3), dtype=np.uint8),
                    rng.integers(0, 5, size=64).astype(np.int64), tuple("abcde"))
    model = _model()
    before = copy.deepcopy(model.state_dict())
    ckpt = tmp_path / "source.pt"
    net, meta = load_or_finetune_iabn(ckpt, model, train, epochs=1, batch_size=32, progress=False)
    assert any(isinstance(m, IABN2d) for m in net.modules()) and len(meta["log"]) == 1
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the source stays as it was
    assert iabn_path(ckpt, epochs=1).is_file()
    again, _ = load_or_finetune_iabn(ckpt, model, train, epochs=1, batch_size=32, progress=False)
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in net.state_dict().items())


def test_an_interrupted_iabn_fine_tuning_resumes_bit_for_bit(tmp_path, monkeypatch):
    import numpy as np

    from dartlib.data.dataset import Dataset
    from dartlib.models import training
    from dartlib.tta.note import finetune_iabn, iabn_path, load_or_finetune_iabn, to_iabn

    rng = np.random.default_rng(1)
    train = Dataset("tiny", "train", rng.integers(0, 255, size=(64, 32, 32, 3), dtype=np.uint8),
                    rng.integers(0, 5, size=64).astype(np.int64), tuple("abcde"))
    model = _model()
    whole, _ = finetune_iabn(to_iabn(model), train, epochs=3, batch_size=32, progress=False)
    real_epoch, calls = training.sgd_epoch, []

    def cut_after_two(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the machine is taken back during the third epoch
        return real_epoch(*args, **kwargs)

    ckpt = tmp_path / "source.pt"
    partial = iabn_path(ckpt, epochs=3).with_suffix(".partial.pt")
    monkeypatch.setattr(training, "sgd_epoch", cut_after_two)
    with pytest.raises(KeyboardInterrupt):
        load_or_finetune_iabn(ckpt, model, train, epochs=3, batch_size=32, progress=False)
    assert partial.is_file() and not iabn_path(ckpt, epochs=3).exists()
    calls.clear()
    monkeypatch.setattr(training, "sgd_epoch", lambda *a, **k: (calls.append(1), real_epoch(*a, **k))[1])
    resumed, meta = load_or_finetune_iabn(ckpt, model, train, epochs=3, batch_size=32, progress=False)
    assert len(calls) == 1 and [e["epoch"] for e in meta["log"]] == [1, 2, 3]  # only the third epoch ran again
    assert all(torch.equal(v, resumed.state_dict()[k]) for k, v in whole.state_dict().items())
    assert not partial.exists()
    # a saved state from another start (here another learning rate) is not resumed
    monkeypatch.setattr(training, "sgd_epoch", cut_after_two)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        load_or_finetune_iabn(tmp_path / "other.pt", model, train, epochs=3, batch_size=32, progress=False)
    monkeypatch.setattr(training, "sgd_epoch", real_epoch)
    with pytest.warns(UserWarning, match="another start"):
        other, _ = load_or_finetune_iabn(tmp_path / "other.pt", model, train, epochs=3, batch_size=32, lr=0.02,
                                         progress=False)
    fresh, _ = finetune_iabn(to_iabn(model), train, epochs=3, batch_size=32, lr=0.02, progress=False)
    assert all(torch.equal(v, other.state_dict()[k]) for k, v in fresh.state_dict().items())


def test_share_source_replaces_only_the_copies_an_adapter_reads():
    def provider(x):
        return torch.zeros(x.shape[0], 3)

    refiner = Refiner(module=RefinementModule(3, hidden=4), config=DartConfig())
    plain = tta.make("tent", small_cnn(3), source_logits=provider)
    assert plain.source is None  # no refiner: no f_theta0_bar to read
    refined = tta.make("tent", small_cnn(3), refiner=refiner, source_logits=provider)
    assert refined.source is provider
    ods = tta.make("ods", small_cnn(3), source_logits=provider)
    assert ods.source is None  # ODS's tracker reads its own pre-trained copy (stored BN statistics), not f_theta0_bar
