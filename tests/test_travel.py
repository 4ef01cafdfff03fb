"""What travels to a GPU machine (at most 64 MiB) and what comes back (parts of at most 16 MiB):
dartlib.data.travel."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest

from dartlib.data import travel
from dartlib.paths import REPO_ROOT


def _bytes(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size=n, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("size", [0, 1, 16 * 1024, 40 * 1024 + 7])
def test_split_then_join_gives_the_file_back(tmp_path, size):
    data = _bytes(size)
    (tmp_path / "model.pt").write_bytes(data)
    manifest = travel.split_file(tmp_path / "model.pt", tmp_path / "parts", part_bytes=16 * 1024)
    meta = json.loads(manifest.read_text())
    assert meta["sha256"] == hashlib.sha256(data).hexdigest() and meta["bytes"] == size
    assert all(part["bytes"] <= 16 * 1024 for part in meta["parts"])
    assert sum(part["bytes"] for part in meta["parts"]) == size
    assert len(meta["parts"]) == max(1, -(-size // (16 * 1024)))
    joined = travel.join_parts(manifest, tmp_path / "back.pt")
    assert joined.read_bytes() == data


def test_parts_are_at_most_16_mib_by_default():
    assert travel.PART_BYTES == 16 * 1024 * 1024
    assert travel.TRAVEL_LIMIT == 64 * 1024 * 1024


def test_join_refuses_an_altered_a_missing_or_a_foreign_part(tmp_path):
    (tmp_path / "model.pt").write_bytes(_bytes(50_000))
    manifest = travel.split_file(tmp_path / "model.pt", tmp_path / "parts", part_bytes=20_000)
    part = tmp_path / "parts" / "model.pt.part001"
    original = part.read_bytes()
    part.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one bit flipped
    with pytest.raises(travel.PartsError, match="part001.*fetch it again"):
        travel.join_parts(manifest, tmp_path / "back.pt")
    assert not (tmp_path / "back.pt").exists()  # nothing half-joined is left
    part.unlink()
    with pytest.raises(travel.PartsError, match="missing"):
        travel.join_parts(manifest, tmp_path / "back.pt")
    part.write_bytes(original)
    meta = json.loads(manifest.read_text())
    meta["sha256"] = "0" * 64  # parts that check one by one but belong to another file
    manifest.write_text(json.dumps(meta))
    with pytest.raises(travel.PartsError, match="another file"):
        travel.join_parts(manifest, tmp_path / "back.pt")


@pytest.mark.parametrize("path, expected", [
    ("dartlib/runner.py", True),
    ("notebooks/06_table1_main.ipynb", True),
    ("notebooks/profiles/paper-c10.yaml", True),
    ("data/paper/table1.csv", True),
    ("data/paper/README.md", False),
    ("data/checkpoints/MANIFEST.json", True),
    ("results/cpu/table1.csv", True),  # notebooks 14 and 15 read the cpu profile's committed rows
    ("results/cpu/notebooks/06_table1_main.ipynb", False),
    ("figures/cpu/table1_gain.png", False),
    ("data/checkpoints/cifar10-resnet26-w16-cpu-seed0.pt", False),
    ("docs/gpu.md", False),
    ("README.md", False),
    ("tests/test_travel.py", False),
])
def test_what_travels(path, expected):
    assert travel.travels(path) is expected


def test_the_sparse_checkout_patterns_choose_what_travels(tmp_path):
    """`travel patterns` (git sparse-checkout) and `travel copy` (sparse_copy) pick the same files."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO_ROOT), str(clone)], check=True)
    subprocess.run(["git", "sparse-checkout", "set", "--no-cone", "--stdin"], cwd=clone, check=True,
                   input="\n".join(travel.SPARSE_PATTERNS).encode())
    subprocess.run(["git", "checkout", "-q"], cwd=clone, check=True)
    present = {str(p.relative_to(clone)) for p in clone.rglob("*") if p.is_file() and ".git" not in p.relative_to(clone).parts}
    wanted = {p for p in travel.tracked_files(clone) if travel.travels(p)}
    assert present == wanted


def test_the_travelling_copy_fits_a_gpu_slot_and_leaves_the_repository_whole(tmp_path):
    before = len(travel.tracked_files())
    copy = travel.sparse_copy(tmp_path / "copy")
    assert copy.files > 0 and copy.left_out > 0
    assert travel.folder_bytes(tmp_path / "copy") == copy.bytes
    # room left for the packed CIFAR-10 (about 20 MB) and the notebook runner's wheels (about 17 MB)
    assert copy.bytes < travel.TRAVEL_LIMIT - 40 * 1024 * 1024, copy.describe()
    assert (tmp_path / "copy" / "notebooks" / "profiles" / "paper-c10.yaml").is_file()
    assert len(travel.tracked_files()) == before
    with pytest.raises(FileExistsError):
        travel.sparse_copy(tmp_path / "copy")


def test_first_per_class_keeps_the_first_images_of_each_class():
    labels = np.array([2, 0, 1, 0, 2, 1, 0, 2])
    assert travel.first_per_class(labels, 2).tolist() == [0, 1, 2, 3, 4, 5]
    assert travel.first_per_class(labels, 1).tolist() == [0, 1, 2]
