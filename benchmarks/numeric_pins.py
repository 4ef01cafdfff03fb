"""What each numeric pin buys and costs on the CPU: smoke source training under each setting.

For each setting, a fresh process (the math libraries read their variables at start-up) trains the
smoke recipe's small CNN on Fashion-MNIST for ``--steps`` SGD steps from the same seed, and reports
the seconds per step and a digest of the trained weights. A pin "buys" bitwise equality when the
weights it gives stay the same after another kernel change is applied on top (which is what a
user's other CPU type does), and it "costs" its time per step against the default's, measured as
ratios in one run (settings taken in turn, ``--repeats`` rounds).

Usage: ``python benchmarks/numeric_pins.py [--steps 150] [--repeats 2]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
    "ONEDNN_MAX_CPU_ISA=SSE41": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "both": {"MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "deterministic algorithms": {"PIN_DETERMINISTIC": "1"},
    "1 thread": {"OMP_NUM_THREADS": "1", "PIN_THREADS": "1"},
    "1 thread + both": {"OMP_NUM_THREADS": "1", "PIN_THREADS": "1", "MKL_CBWR": "COMPATIBLE",
                        "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def child(steps: int) -> None:
    import time

    import torch

    from dartlib.data import load
    from dartlib.models.backbones import build
    from dartlib.data.augmentation import augment, to_tensor
    from dartlib.models.training import RECIPES

    if os.environ.get("PIN_DETERMINISTIC"):
        torch.use_deterministic_algorithms(True)
    if os.environ.get("PIN_THREADS"):
        torch.set_num_threads(int(os.environ["PIN_THREADS"]))
    rec = RECIPES["smoke"]
    train = load("fmnist", split="train")
    torch.manual_seed(0)
    model = build("small-cnn", num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=rec.lr, momentum=rec.momentum, nesterov=rec.nesterov,
                          weight_decay=rec.weight_decay)
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(len(train), generator=gen)
    labels = torch.from_numpy(train.labels)
    model.train()
    start = time.perf_counter()
    for i in range(steps):
        idx = order[i * rec.batch_size : (i + 1) * rec.batch_size]
        x = augment(to_tensor(train.images[idx.numpy()]), kind=rec.augmentation, generator=gen)
        loss = torch.nn.functional.cross_entropy(model(x), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(tensor.numpy().tobytes())
    print(json.dumps({"seconds_per_step": seconds / steps, "digest": h.hexdigest()[:12], "loss": float(loss)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.steps)
        return
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for _ in range(args.repeats):
        for name, env in SETTINGS.items():
            out = subprocess.run([sys.executable, __file__, "--child", "--steps", str(args.steps)], check=True,
                                 capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1", **env})
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = min(r["seconds_per_step"] for r in runs["default"])
    print(f"smoke recipe, {args.steps} SGD steps, best of {args.repeats}; time relative to default")
    print("| setting | ms/step | time vs default | weights digest | same weights as default |")
    print("|---|---|---|---|---|")
    for name, rs in runs.items():
        best = min(r["seconds_per_step"] for r in rs)
        digests = {r["digest"] for r in rs}
        same = digests == {runs["default"][0]["digest"]}
        print(f"| {name} | {1000 * best:.1f} | {best / base:.2f}x | {', '.join(sorted(digests))} | {'yes' if same else 'no'} |")


if __name__ == "__main__":
    main()
