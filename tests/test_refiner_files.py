"""A refiner file's training log compacted for committing: the module and config untouched, the log
kept every LOG_EVERY steps as plain floats, the full file's sha256 recorded, done once."""

from __future__ import annotations

import torch

from dartlib.dart.intermediate import compact_log, compact_refiner_file
from dartlib.models.artefacts import sha256_of
from dartlib.models.checkpoints import load_weights, save_weights


def test_compacting_keeps_the_module_and_every_50th_step(tmp_path):
    log = [{"epoch": 1 + i // 100, "step": i + 1, "loss_imb": torch.tensor(1.0 / (i + 1)), "lr": 1e-3} for i in range(230)]
    path = tmp_path / "r.pt"
    module = {"w": torch.randn(4, 3)}
    save_weights({"module": module, "config": {"alpha": 0.1}, "log": log, "meta": {"seconds": 1.0}}, path=path)
    before = sha256_of(path)
    assert compact_refiner_file(path) and not compact_refiner_file(path)  # once
    blob = load_weights(path)
    assert torch.equal(blob["module"]["w"], module["w"]) and blob["config"] == {"alpha": 0.1}
    assert [e["step"] for e in blob["log"]] == [1, 51, 101, 151, 201, 230]
    assert isinstance(blob["log"][1]["loss_imb"], float) and abs(blob["log"][1]["loss_imb"] - 1.0 / 51) < 1e-7
    assert blob["meta"] == {"seconds": 1.0, "log": {"every": 50, "steps": 230, "full_file_sha256": before}}
    assert compact_log(log, every=100)[-1]["step"] == 230
