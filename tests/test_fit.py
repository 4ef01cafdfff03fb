"""The public API for a classifier of one's own (dartlib.dart.fit, dartlib.tta.wrap): data layouts,
the refusals (each naming the fix), the cache keyed by weights and data, and the wrapped methods."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dartlib.dart.fit import SettingError, check_supported, fit_refiner, labelled_images
from dartlib.dart.intermediate import load_or_train_refiners
from dartlib.dart.refiner_probe import INTERMEDIATE_REVISION, model_probe, saved_meta
from dartlib.dart.refiner import DartConfig
from dartlib.models.artefacts import weights_digest
from dartlib.registry import UnknownNameError
from dartlib.tta.wrap import stream_accuracy, wrap

K = 4
TINY = DartConfig(per_class=40, n_dir=4, epochs=1, batch_size=32, hidden=16)


def tiny_model(seed: int = 0, channels: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(channels, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, K))


def uint8_data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n images 8 x 8 x 3 (uint8, channels last) with labels cycling over the K classes."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8), np.arange(n) % K


def test_the_layouts_give_the_same_data():
    images, labels = uint8_data()
    as_float = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255  # N x C x H x W in [0, 1]

    class Items(torch.utils.data.Dataset):
        def __len__(self):
            return len(labels)

        def __getitem__(self, i):
            return as_float[i], int(labels[i])

    digests = {labelled_images(data, num_classes=K).digest()
               for data in [(images, labels), (as_float, torch.from_numpy(labels)), Items()]}
    assert len(digests) == 1
    grey = labelled_images((as_float[:, :1], labels), num_classes=K)
    assert grey.images.shape == (200, 8, 8, 1) and grey.num_classes == K


@pytest.mark.parametrize("data, fix", [
    (lambda x, y: (np.transpose(x, (0, 3, 1, 2)), y), "images.transpose(0, 2, 3, 1)"),  # uint8 channels first
    (lambda x, y: (torch.from_numpy(x).float() / 255, y), "images.permute(0, 3, 1, 2)"),  # float channels last
    (lambda x, y: ((torch.from_numpy(x).permute(0, 3, 1, 2).float() - 128) / 64, y), "inside the model"),
    (lambda x, y: (x[:, :, :, 0], y), "add the channel axis"),
    (lambda x, y: (x, y + 1), "labels span 1..4 but num_classes=4"),
    (lambda x, y: (x, y % 3), "no training image of class [3]"),
    (lambda x, y: (x, y[:-1]), "200 images but 199 labels"),
    (lambda x, y: (x, y.astype(float)), "give integer class indices"),
])
def test_data_that_cannot_be_read_is_refused_naming_the_fix(data, fix):
    with pytest.raises(SettingError) as err:
        labelled_images(data(*uint8_data()), num_classes=K)
    assert fix in str(err.value)


def test_a_test_set_may_lack_a_class():
    images, labels = uint8_data()
    assert len(labelled_images((images, labels % 3), num_classes=K, every_class=False)) == 200


def test_settings_the_data_cannot_support_are_refused_with_a_value_that_works():
    labels = np.arange(400) % K  # 100 per class
    with pytest.raises(SettingError, match=r"per_class=200\) but class 0 has 100 images: use per_class=100"):
        check_supported(labels, DartConfig(per_class=200), num_classes=K)
    with pytest.raises(SettingError, match=r"batch_size=512\) exceeds D_int's 400 images .*use batch_size=256"):
        check_supported(labels, DartConfig(batch_size=512), num_classes=K)
    with pytest.raises(SettingError) as err:
        check_supported(labels, DartConfig(epochs=3), num_classes=K)  # n_dir 250 needs 2,500 images
    assert "needs 2500 images: use DartConfig(n_dir=20) (20 images per chunk" in str(err.value)
    check_supported(labels, DartConfig(epochs=3, n_dir=20), num_classes=K)  # the value named passes
    # 400 images could hold 36 chunks of 10 or more, but no Dirichlet split into them is found
    with pytest.raises(SettingError, match=r"n_dir=36\).*no such split was found in 100 tries.*n_dir=20"):
        check_supported(labels, DartConfig(epochs=3, n_dir=36), num_classes=K)
    check_supported(labels, DartConfig(n_dir=250, sampling="unif-lt"), num_classes=K)  # no chunks to fill


def test_models_dart_cannot_refine_are_refused_before_training(tmp_path):
    data = uint8_data()
    no_bn = nn.Sequential(nn.Flatten(), nn.Linear(192, K))
    with pytest.raises(SettingError, match="has no BatchNorm layer"):
        fit_refiner(model=no_bn, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path)
    three_logits = nn.Sequential(tiny_model(), nn.Linear(K, 3))
    with pytest.raises(SettingError, match=r"num_classes=4 but the model returns 3 logits per image: pass num_classes=3"):
        fit_refiner(model=three_logits, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path)
    # one class too many: the labels leave it empty, but what is wrong is num_classes against the logits
    with pytest.raises(SettingError) as err:
        fit_refiner(model=tiny_model(), data=data, num_classes=K + 1, device="cpu", config=TINY, cache_dir=tmp_path)
    assert str(err.value).startswith(f"num_classes={K + 1} but the model returns {K} logits per image")
    assert "\n" not in str(err.value)
    with pytest.raises(SettingError, match=r"model returned \(2, 4, 1\) for 2 images; DART needs logits \(2, 4\)"):
        fit_refiner(model=nn.Sequential(tiny_model(), nn.Unflatten(1, (K, 1))), data=data, num_classes=K, device="cpu",
                    config=TINY, cache_dir=tmp_path)
    with pytest.raises(SettingError, match=r"model\(x\) failed on two training images .*float32 \(2, 1, 8, 8\)"):
        fit_refiner(model=tiny_model(), data=(data[0][..., :1], data[1]), num_classes=K, device="cpu", config=TINY,
                    cache_dir=tmp_path)
    with pytest.raises(SettingError, match="model.features"):
        fit_refiner(model=tiny_model(), data=data, num_classes=K, device="cpu", cache_dir=tmp_path,
                    config=DartConfig(per_class=40, n_dir=4, epochs=1, batch_size=32, outputs="additive"))
    with pytest.raises(SettingError, match="device='tpu'"):
        fit_refiner(model=tiny_model(), data=data, num_classes=K, device="tpu", config=TINY, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written


def test_the_cache_is_keyed_by_the_weights_and_the_data(tmp_path):
    data = uint8_data()
    model = tiny_model(0)
    before = weights_digest(model)
    first = fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path,
                        progress=False)
    assert not first.reused and len(first.log) == 160 // 32 and weights_digest(model) == before  # model unchanged
    again = fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path)
    assert again.reused and again.path == first.path
    assert all(torch.equal(a, b) for a, b in zip(first.refiner.module.state_dict().values(),
                                                 again.refiner.module.state_dict().values()))
    other_model = fit_refiner(model=tiny_model(1), data=data, num_classes=K, device="cpu", config=TINY,
                              cache_dir=tmp_path, progress=False)
    other_data = fit_refiner(model=model, data=uint8_data(seed=1), num_classes=K, device="cpu", config=TINY,
                             cache_dir=tmp_path, progress=False)
    other_config = fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=DartConfig(
        per_class=40, n_dir=4, epochs=1, batch_size=32, hidden=16, alpha=1.0), cache_dir=tmp_path, progress=False)
    assert not (other_model.reused or other_data.reused or other_config.reused)
    assert len({first.path, other_model.path, other_data.path, other_config.path}) == 4


class MyCNN(nn.Module):
    """A small BN CNN whose activation is a choice: the same weights compute another function."""

    def __init__(self, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), act(), nn.AdaptiveAvgPool2d(1),
                                 nn.Flatten(), nn.Linear(8, K))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def test_the_cache_never_hands_one_models_refiner_to_another_that_computes_otherwise(tmp_path):
    """The same weights and buffers behind GELU instead of ReLU are another model: its refiner is
    trained anew (the probe batch's logits differ), and the ReLU model's file is not read for it."""
    data = uint8_data()
    torch.manual_seed(0)
    m = MyCNN()
    first = fit_refiner(model=m, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path,
                        progress=False)
    m2 = MyCNN(act=nn.GELU)
    m2.load_state_dict(m.state_dict())
    assert weights_digest(m2) == weights_digest(m)  # the weights alone cannot tell them apart
    second = fit_refiner(model=m2, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path,
                         progress=False)
    assert not first.reused and not second.reused
    meta = saved_meta(second.path)
    assert meta["probe_digest"] == model_probe(m2, labelled_images(data, num_classes=K)).digest
    assert meta["probe_digest"] != model_probe(m, labelled_images(data, num_classes=K)).digest
    assert meta["intermediate_revision"] == INTERMEDIATE_REVISION
    again = fit_refiner(model=m2, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path)
    assert again.reused  # the same model again: read back


def test_a_refiner_of_another_code_revision_or_without_a_probe_is_trained_anew(tmp_path, monkeypatch):
    data = uint8_data()
    model = tiny_model()
    first = fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path,
                        progress=False)
    monkeypatch.setattr("dartlib.dart.refiner_probe.INTERMEDIATE_REVISION", "older")
    assert not fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path,
                           progress=False).reused
    monkeypatch.undo()
    # a file saved before the probe was recorded: the suite's own reader still takes it, fit_refiner does not
    blob = torch.load(first.path, weights_only=True)
    blob["meta"] = {k: v for k, v in blob["meta"].items() if not k.startswith(("probe", "intermediate"))}
    blob.pop("digest")  # nor its contents' digest, added later still
    torch.save(blob, first.path)
    anchor = first.path.with_name(first.path.name.split(".")[0] + ".pt")
    [(_, log)] = load_or_train_refiners(anchor, model, labelled_images(data, num_classes=K), [TINY], device="cpu")
    assert log == blob["log"]  # read, not trained
    assert not fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path,
                           progress=False).reused
    assert fit_refiner(model=model, data=data, num_classes=K, device="cpu", config=TINY, cache_dir=tmp_path).reused


def test_wrap_puts_any_method_around_a_copy_with_the_refiner(tmp_path):
    images, labels = uint8_data()
    model = tiny_model()
    fitted = fit_refiner(model=model, data=(images, labels), num_classes=K, device="cpu", config=TINY,
                         cache_dir=tmp_path, progress=False)
    before = weights_digest(model)
    x = torch.from_numpy(images[:50]).permute(0, 3, 1, 2).float() / 255
    plain = wrap("bnadapt", model=model, refiner=None, device="cpu")(x)
    refined = wrap("bnadapt", model=model, refiner=fitted.refiner, device="cpu")(x)
    # BNAdapt+DART is BNAdapt's logits through this batch's W_B, b_B (Algorithm 2)
    assert torch.allclose(refined, fitted.refiner(plain, plain), atol=1e-6)
    tent = wrap("tent", model=model, refiner=fitted.refiner, device="cpu")
    accuracy = stream_accuracy(tent, (images, labels), num_classes=K, batch_size=50, device="cpu")
    assert 0.0 <= accuracy <= 100.0 and weights_digest(model) == before  # TENT adapted its copy only
    assert weights_digest(tent.model) != before
    with pytest.raises(SettingError, match="lame reads penultimate features: the model needs model.features"):
        wrap("lame", model=model, refiner=None, device="cpu")
    with pytest.raises(UnknownNameError, match="tnet"):
        wrap("tnet", model=model, refiner=None, device="cpu")


def test_stream_accuracy_scores_the_stream_in_its_order():
    images, labels = uint8_data(n=40)

    class Oracle:
        """Predicts class 0 always: right on exactly the images of class 0."""

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return torch.eye(K)[torch.zeros(len(x), dtype=torch.long)]

    assert stream_accuracy(Oracle(), (images, labels), num_classes=K, batch_size=7, device="cpu") == 25.0
    order = np.flatnonzero(labels == 0)[:6]
    assert stream_accuracy(Oracle(), (images, labels), num_classes=K, batch_size=4, device="cpu", order=order) == 100.0
