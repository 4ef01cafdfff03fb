"""Test-time methods: what they change, that they optimise, and that W = I, b = 0 is a no-op."""

from __future__ import annotations

import copy

import pytest
import torch

from dartlib import tta
from dartlib.dart import DartConfig, RefinementModule, Refiner
from dartlib.models import bn_layers, small_cnn


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


@pytest.mark.parametrize("name", ["tent", "pl", "sar", "delta"])
def test_gradient_methods_change_only_bn_affine(name):
    model = _model()
    before = copy.deepcopy(model.state_dict())
    options = {"pl": {"threshold": 0.0}, "sar": {"margin_factor": 2.0}}.get(name, {})
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


@pytest.mark.parametrize("name", ["noadapt", "bnadapt", "tent", "pl", "lame", "sar", "delta"])
def test_identity_refiner_reproduces_the_method_bit_for_bit(name):
    options = {"pl": {"threshold": 0.2}, "sar": {"margin_factor": 2.0}}.get(name, {})
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
    with pytest.raises(KeyError, match="valid names: noadapt, bnadapt, tent, pl, lame, sar, delta"):
        tta.make("cotta", _model())
    with pytest.raises(ValueError, match="valid: adam, sgd"):
        tta.make("tent", _model(), optimizer="rmsprop")
    with pytest.raises(ValueError, match="valid: sum, mean"):
        tta.make("tent", _model(), entropy_normalisation="max")
    with pytest.raises(TypeError, match="bnadapt: .*unexpected keyword argument 'lr'"):
        tta.make("bnadapt", _model(), lr=0.1)
    with pytest.raises(ValueError, match="threshold"):
        tta.make("pl", _model(), threshold=1.5)


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
    from dartlib.models import resnet26

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
