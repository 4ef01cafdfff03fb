"""Where computations run: $DART_DEVICE, else the GPU when there is one, else the CPU."""

import pytest
import torch

from dartlib.devices import default_device


def test_default_device_follows_the_environment(monkeypatch):
    monkeypatch.delenv("DART_DEVICE", raising=False)
    assert default_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("DART_DEVICE", "cpu")
    assert default_device() == "cpu"
    monkeypatch.setenv("DART_DEVICE", "tpu")
    with pytest.raises(ValueError, match="valid: cpu, cuda"):
        default_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv("DART_DEVICE", "cuda")
        with pytest.raises(ValueError, match="sees no GPU"):
            default_device()


def test_logit_statistics_leave_the_callers_model_alone():
    import numpy as np

    from dartlib.dart.intermediate import logit_statistics
    from dartlib.models.backbones import small_cnn

    torch.manual_seed(0)
    model = small_cnn(3).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    images = np.random.default_rng(0).integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    stats = logit_statistics(model, images, batch_size=4)
    assert model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    with torch.no_grad():
        logits = model.eval()(torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255).double()
    assert stats["max"] == pytest.approx(float(logits.max(1).values.mean()))
    assert stats["sum"] == pytest.approx(float(logits.sum(1).mean()))
