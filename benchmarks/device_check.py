"""GPU check of the suite's device code paths, printed as one report.

1. Throughput of the CIFAR-size backbones on the GPU (eval, BN-adapt, training step).
2. Source training on the GPU (bfloat16 autocast, channels-last): the smoke recipe, seed 1.
3. Every Table 1 method (plus MEMO and ROID), with and without DART, over one Fashion-MNIST-C
   long-tailed stream, on the CPU and on the GPU (in fp32) from the same CPU-trained smoke
   checkpoint; the accuracies side by side and the share of identical predictions.

Needs the smoke checkpoint (``python -m dartlib train --profile smoke``) and Fashion-MNIST under
the data root (or DART_FMNIST_DIR). Usage: ``python benchmarks/device_check.py``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from dartlib.perf.throughput import model_throughput
from dartlib.dart.refiner import DartConfig
from dartlib.data import load
from dartlib.data.prepare import prepare_corrupted
from dartlib.experiments.grid import Cell
from dartlib.dart.intermediate import load_or_train_refiner
from dartlib.experiments.cell_streams import cell_stream
from dartlib.experiments.engine import TestTimeContext
from dartlib.models.streams import TestStream, stream_predictions
from dartlib.studies.table1 import TABLE1_METHODS
from dartlib.models.checkpoints import checkpoint_path, load_checkpoint
from dartlib.models.training import train_source
from dartlib.tta.note import load_or_finetune_iabn


def predictions(context: TestTimeContext, cell: Cell) -> tuple[np.ndarray, np.ndarray]:
    torch.manual_seed(cell.seed)
    images, labels, order = cell_stream(cell)
    stream = TestStream(images=images, order=order, batch_size=context.batch_size, device=context.device)
    return stream_predictions(context.adapter(cell), stream), labels[order]


def main() -> None:
    assert torch.cuda.is_available(), "no CUDA device"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("\n== 1. backbone throughput on the GPU (images/second, batch 200, fp32)")
    print(model_throughput(("small-cnn", "resnet26-w16", "resnet26"), batch=200, repeats=20, device="cuda")
          .to_string(index=False, float_format=lambda v: f"{v:.0f}"))

    print("\n== 2. smoke recipe on the GPU (bf16 autocast, channels-last), seed 1")
    start = time.perf_counter()
    _, meta = load_checkpoint(train_source(dataset="fmnist", arch="small-cnn", recipe="smoke", seed=1, device="cuda",
                                           progress=False))
    print(f"clean test accuracy {meta['clean_test_accuracy']:.2f}% in {time.perf_counter() - start:.1f} s "
          f"(device {meta['device']})")

    print("\n== 3. methods on CPU vs GPU, fmnistc gaussian_noise severity 5, LT rho 100, batch 200")
    prepare_corrupted("fmnistc", corruptions=["gaussian_noise"])
    ckpt = checkpoint_path(dataset="fmnist", arch="small-cnn", recipe="smoke", seed=0)
    model, _ = load_checkpoint(ckpt)
    train = load("fmnist", split="train")
    config = DartConfig(n_dir=25, epochs=5, per_class=500)
    refiner, _ = load_or_train_refiner(ckpt, model, train, config, device="cuda", progress=False)
    iabn, _ = load_or_finetune_iabn(ckpt, model, train, epochs=1, per_class=500, device="cuda", progress=False)
    rows = []
    for method in (*TABLE1_METHODS, "memo", "roid"):
        for ref in ("none", "dart"):
            if method == "noadapt" and ref == "dart":
                continue
            cell = Cell(dataset="fmnistc", shift="lt", shift_param=100.0, corruption="gaussian_noise", severity=5,
                        method=method, refiner=ref)
            got = {}
            for device in ("cpu", "cuda"):
                context = TestTimeContext(source=model, refiner=refiner, iabn=iabn, batch_size=200, device=device,
                                          options={"memo": {"n_augmentations": 4}}, precision="fp32")
                start = time.perf_counter()
                pred, labels = predictions(context, cell)
                got[device] = (pred, 100.0 * float((pred == labels).mean()), time.perf_counter() - start)
            rows.append({"method": method, "refiner": ref, "cpu_acc": got["cpu"][1], "gpu_acc": got["cuda"][1],
                         "same_pred_%": 100.0 * float((got["cpu"][0] == got["cuda"][0]).mean()),
                         "cpu_s": got["cpu"][2], "gpu_s": got["cuda"][2]})
            print(rows[-1], flush=True)
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    main()
