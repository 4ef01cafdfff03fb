"""Backbones and batch-norm helpers."""

from __future__ import annotations

import pytest
import torch

from dartlib.models import backbones as M


def test_resnet26_parameter_counts():
    assert M.count_parameters(M.resnet26(10)) == 17_444_682
    assert M.count_parameters(M.resnet26(100)) == 17_490_852
    bn_affine = sum(p.numel() for p in M.set_trainable(M.resnet26(10), "bn-affine"))
    assert bn_affine == 13_440


def test_resnet26_shapes_and_features():
    model = M.resnet26(10, width=16).eval()
    x = torch.rand(3, 3, 32, 32)
    assert model(x).shape == (3, 10)
    assert model.features(x).shape == (3, 128)
    torch.testing.assert_close(model.head(model.features(x)), model(x))


def _stats(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_bn_adapt_uses_batch_statistics_and_changes_nothing():
    torch.manual_seed(0)
    model = M.small_cnn(10, width=8)
    model.train()
    for _ in range(3):  # give the running statistics non-trivial values
        model(torch.rand(16, 3, 32, 32))
    before = _stats(model)
    adapted = M.frozen_bn_adapted(model)
    x = torch.rand(8, 3, 32, 32) * 3 + 1  # far from the source statistics
    out = adapted(x)
    assert all(torch.equal(v, adapted.state_dict()[k]) for k, v in before.items())
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert not any(p.requires_grad for p in adapted.parameters())
    # batch statistics: the output of a batch does not match the source-statistics output
    source = M.use_source_statistics(model)(x)
    assert not torch.allclose(out, source)
    # per-batch normalisation: a sample's output depends on the rest of its batch
    assert not torch.allclose(adapted(x[:4]), out[:4])
    # and the mode is reversible on the original model
    M.use_batch_statistics(model)
    torch.testing.assert_close(model(x), out)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items() if "num_batches" not in k)


def test_set_trainable_options():
    model = M.small_cnn(10, width=8)
    names = {n for n, p in model.named_parameters() if p in set(M.set_trainable(model, "bn-affine"))}
    assert names and all(".weight" in n or ".bias" in n for n in names)
    assert all(not p.requires_grad for n, p in model.named_parameters() if n.startswith("linear"))
    assert len(M.set_trainable(model, "all")) == len(list(model.parameters()))
    assert M.set_trainable(model, "none") == []
    with pytest.raises(ValueError, match="valid: bn-affine, all, none"):
        M.set_trainable(model, "head")


def test_conjugate_pl_checkpoint_format(tmp_path):
    source = M.resnet26(10, width=16)
    state = {f"module.{k}": v for k, v in source.state_dict().items()}
    state["module.extra_norm_buffer"] = torch.zeros(3)
    torch.save({"net": state}, tmp_path / "ckpt.pth")
    target = M.load_conjugate_pl_checkpoint(tmp_path / "ckpt.pth", M.resnet26(10, width=16))
    x = torch.rand(2, 3, 32, 32)
    torch.testing.assert_close(target.eval()(x), source.eval()(x))
    with pytest.raises(M.ModelMissingError, match="tta_conjugate"):
        M.load_conjugate_pl_checkpoint(tmp_path / "absent.pth", M.resnet26(10))
    torch.save({"net": {"module.conv1.weight": torch.zeros(1)}}, tmp_path / "bad.pth")
    with pytest.raises(KeyError, match="lacks"):
        M.load_conjugate_pl_checkpoint(tmp_path / "bad.pth", M.resnet26(10, width=16))


def test_registry_and_resnet50_weights_error(monkeypatch, tmp_path):
    with pytest.raises(KeyError, match="valid names: resnet26, resnet26-w16, resnet26-w8, small-cnn, resnet50"):
        M.build("vgg", num_classes=10)
    assert M.count_parameters(M.resnet50(7)) == 23_522_375
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(M.ModelMissingError, match="resnet50-0676ba61.pth"):
        M.resnet50(1000, weights="imagenet")


def test_training_is_deterministic_and_resumable(tmp_path, monkeypatch):
    """Same seed on the CPU: bit-identical checkpoints, whether trained in one go or resumed."""
    import gzip

    import numpy as np

    from dartlib.models import checkpoints, training

    rng = np.random.default_rng(0)
    folder = tmp_path / "fm"
    folder.mkdir()
    for prefix, n in (("train", 512), ("t10k", 128)):
        gray = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        for kind, arr in (("images-idx3", gray), ("labels-idx1", labels)):
            header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
            with gzip.open(folder / f"{prefix}-{kind}-ubyte.gz", "wb") as fh:
                fh.write(header + arr.tobytes())
    monkeypatch.setenv("DART_FMNIST_DIR", str(folder))
    states = []
    for run, split_epochs in (("a", None), ("b", 1)):
        monkeypatch.setenv("DART_DATA_DIR", str(tmp_path / run))
        kwargs = dict(dataset="fmnist", arch="small-cnn", recipe="smoke", seed=3, progress=False)
        if split_epochs:
            partial = training.train_source(max_epochs=split_epochs, **kwargs)
            assert partial.name.endswith(".partial.pt")
        path = training.train_source(**kwargs)
        model, meta = checkpoints.load_checkpoint(path)
        assert meta["epochs"] == 2 and len(meta["history"]) == 2 and meta["dataset"] == "fmnist"
        assert len(meta["dataset_digest"]) == 64 and 0 <= meta["clean_test_accuracy"] <= 100
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
