"""The baselines as their authors describe them (Appendix A and the reference code), each pinned
on a small synthetic stream: NOTE+DART's memory, SAR's second pass and reset, ODS's tracker,
ROID's weighted consistency, MEMO's AugMix views and DART-split's CIFAR-100 delta."""

from __future__ import annotations

import pytest
import torch

from dartlib import tta
from dartlib.dart.refiner import DartConfig, RefinementModule, Refiner
from dartlib.data.augmentation import augmix_views, cotta_view
from dartlib.models.backbones import small_cnn


def _model(k=5):
    torch.manual_seed(0)
    model = small_cnn(k, width=4)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.rand(32, 3, 32, 32))
    return model.eval()


def _stream(n=3, batch=16):
    g = torch.Generator().manual_seed(1)
    return [torch.rand(batch, 3, 32, 32, generator=g) for _ in range(n)]


def _class3_refiner():
    """A refiner whose b_B forces class 3 whatever the logits."""
    refiner = Refiner(module=RefinementModule(5, hidden=8), config=DartConfig())
    with torch.no_grad():
        refiner.module.net[2].bias[-5:] = torch.tensor([0, 0, 0, 9.0, 0])
    return refiner


@pytest.mark.parametrize("dart_use", ["memory", "report"])
def test_note_with_dart_stores_by_refined_prediction_and_reports_per_option(dart_use):
    x = _stream(1)[0]
    plain = tta.make("note", _model(), memory=16)
    unrefined = plain(x)
    adapter = tta.make("note", _model(), refiner=_class3_refiner(), memory=16, source=_model(), dart_use=dart_use)
    out = adapter(x)
    assert adapter.memory.counts()[3] == 16  # PBRS stores by the refined prediction either way
    if dart_use == "report":
        assert (out.argmax(1) == 3).all()
    else:  # the paper's reading: DART only decides what enters the memory
        torch.testing.assert_close(out, unrefined)
    with pytest.raises(ValueError, match="dart_use"):
        tta.make("note", _model(), dart_use="both")


def test_note_dart_use_reaches_the_adapter_through_a_cell_param():
    from dartlib.experiments.engine import TestTimeContext
    from dartlib.experiments.grid import Cell

    source = _model()
    context = TestTimeContext(source=source, refiner=_class3_refiner(), trained={"iabn": tta.note.to_iabn(source)}, batch_size=16)
    cell = dict(dataset="d", corruption="c", severity=5, shift="lt", shift_param=1.0, method="note", refiner="dart",
                seed=0)
    default = context.adapter(Cell(**cell, params=""))
    report = context.adapter(Cell(**cell, params="dart_use=report"))
    assert (default.dart_use, report.dart_use) == ("memory", "report")


def test_method_revisions_move_the_input_digest_of_changed_methods_only(monkeypatch):
    from dartlib.experiments import engine
    from dartlib.experiments.engine import TestTimeContext
    from dartlib.experiments.grid import Cell

    monkeypatch.setattr(engine, "stream_digest", lambda cell: "no test data here")  # dataset "d" is fictional
    context = TestTimeContext(source=_model(), refiner=None)
    cell = dict(dataset="d", corruption="c", severity=5, shift="lt", shift_param=1.0, refiner="none", seed=0, params="")
    for method in ("tent", "ods", "sar"):
        digest = context.inputs(Cell(**cell, method=method))
        cls = tta.METHODS[method]
        before, cls.revision = cls.revision, cls.revision + 1
        try:
            assert context.inputs(Cell(**cell, method=method)) != digest
        finally:
            cls.revision = before
    assert tta.METHODS["tent"].revision == 0  # untouched methods keep their stored rows
    assert all(tta.METHODS[m].revision for m in ("note", "ods", "sar", "roid", "memo"))


def _confident_resnet():
    from dartlib.models.backbones import resnet26

    torch.manual_seed(0)
    model = resnet26(5, width=2).eval()
    head = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        head.weight.mul_(30.0)  # confident enough that some samples pass SAR's margin
    return model


def test_sar_second_pass_filters_the_first_pass_kept_samples(monkeypatch):
    adapter = tta.make("sar", _confident_resnet(), lr=1e-2, margin_factor=0.4)
    seen = []
    original = adapter._entropy

    def spy(batch, refine):
        ent, refined = original(batch, refine)
        seen.append(ent.detach())
        return ent, refined

    monkeypatch.setattr(adapter, "_entropy", spy)
    adapter(_stream(1, batch=64)[0])
    first, second = seen
    margin = 0.4 * torch.log(torch.tensor(5.0))
    kept = (first < margin) & (second < margin)
    assert kept.any()
    assert adapter.ema == pytest.approx(float(second[kept].mean()), rel=1e-5)  # the second-pass loss


def test_sar_resets_when_its_ema_falls_below_0_2_in_online_imbalance_mode():
    from dartlib.studies.online_imbalance import METHOD_OPTIONS

    assert METHOD_OPTIONS["sar"] == {"reset": True}
    model = _confident_resnet()
    adapter = tta.make("sar", model, lr=1e-2, **METHOD_OPTIONS["sar"])
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    assert adapter.reset_constant == 0.2
    x = _stream(1, batch=64)[0]
    adapter(x)  # confident predictions: the second-pass loss, hence its EMA, is below 0.2 at once
    assert adapter.resets == 1 and adapter.ema is None
    assert all(torch.equal(v, initial[k]) for k, v in model.state_dict().items())
    never = tta.make("sar", _confident_resnet(), lr=1e-2)
    for _ in range(3):
        never(x)
    assert never.resets == 0 and never.ema < 0.2  # without the online-imbalance option the model never returns


def test_ods_tracks_w_over_time_from_the_pretrained_unary_and_averages():
    model = _model()
    adapter = tta.make("ods", model, lr=1e-2, momentum=0.5)
    stream = _stream(2)
    out = adapter(stream[0])
    torch.testing.assert_close(out.exp().sum(1), torch.ones(16))
    w1 = adapter.label_distribution.clone()
    assert float(w1.sum()) == pytest.approx(1.0, abs=1e-5)
    # w_1 = 0.5 * 1/K + 0.5 * mean z: never further than half-way from uniform
    assert float((w1 - 0.2).abs().max()) <= 0.4 + 1e-6
    adapter(stream[1])
    assert not torch.equal(adapter.label_distribution, w1)
    assert adapter.pretrained.training is False and not any(p.requires_grad for p in adapter.pretrained.parameters())
    weights = adapter.class_weights()
    assert float(weights.mean()) == pytest.approx(1.0)
    rare, common = adapter.label_distribution.argmin(), adapter.label_distribution.argmax()
    assert weights[rare] > weights[common]


def test_ods_reported_prediction_is_the_average_of_z_and_p():
    from torch.nn import functional as F

    from dartlib.tta.lame import knn_affinity, laplacian_solution

    adapter = tta.make("ods", _model(), lr=0.0)
    x = _stream(1)[0]
    out = adapter(x)
    with torch.no_grad():
        features = adapter.model.features(x)
        p = F.softmax(adapter.model.head(features), 1)
        z = laplacian_solution(F.softmax(adapter.pretrained(x), 1), knn_affinity(F.normalize(features, dim=1), adapter.k))
    torch.testing.assert_close(out.exp(), 0.5 * (z + p), atol=1e-5, rtol=1e-4)


def test_roid_consistency_is_weighted_by_the_sample_weights(monkeypatch):
    import dartlib.tta.roid as roid

    captured = {}
    original = roid.symmetric_cross_entropy

    def spy(a, b, **kw):
        per_sample = original(a, b, **kw)
        captured["per_sample"] = per_sample
        return per_sample

    monkeypatch.setattr(roid, "symmetric_cross_entropy", spy)
    adapter = tta.make("roid", _model(), lr=0.0, prior=False)
    x = _stream(1, batch=32)[0]
    adapter(x)
    # only the kept samples go through the augmented pass
    assert 0 < len(captured["per_sample"]) < 32
    # the EMA started from 1/K: after one batch it is 0.9/K + 0.1 mean p
    assert float(adapter.class_probs.sum()) == pytest.approx(1.0, abs=1e-5)
    assert float(adapter.class_probs.min()) >= 0.9 / 5 - 1e-6


def test_roid_consistency_weights_change_the_gradient():
    from dartlib.tta.roid import symmetric_cross_entropy

    a = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(4, 5, requires_grad=True)
    symmetric_cross_entropy(a, b).sum().backward()
    assert b.grad is not None and b.grad.abs().sum() > 0  # no target detached
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    weights = torch.tensor([1.0, 0.0, 2.0, 0.5])
    (weights * symmetric_cross_entropy(a2, b2)).sum().backward()
    assert torch.all(a2.grad[1] == 0) and not torch.allclose(a2.grad[2], a.grad[2])


def test_roid_and_memo_views():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 3, 32, 32, generator=g)
    view = cotta_view(x, generator=g)
    assert view.shape == x.shape and float(view.min()) >= 0 and float(view.max()) <= 1
    views = augmix_views(x, n_views=3, generator=g)
    assert views.shape == (3, 4, 3, 32, 32) and float(views.min()) >= 0 and float(views.max()) <= 1
    again = augmix_views(x, n_views=3, generator=torch.Generator().manual_seed(5))
    assert not torch.equal(views, again)


def test_dart_split_delta_on_cifar100c_is_appendix_b():
    from dartlib.studies.large_benchmarks import BENCHMARKS

    c100 = BENCHMARKS["cifar100c-imb"]
    assert c100.dart["delta"] == 0.1 and {**c100.dart, **c100.split}["delta"] == 0.01
    assert BENCHMARKS["imagenet-c-imb"].split == {}
