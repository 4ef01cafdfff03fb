"""Tests of dartlib.data.corruptions against shared/specs/cifar10c.md (the spec)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from dartlib.data import blur_corruptions, corruption_kernels, digital_corruptions, noise_corruptions, weather_corruptions
from dartlib.data import corruptions as corr
from dartlib.data.corruptions import CORRUPTIONS, corrupt

PAPER_ORDER = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
DETERMINISTIC = {"defocus_blur", "zoom_blur", "brightness", "contrast", "pixelate", "jpeg_compression"}
RANDOM = [name for name in PAPER_ORDER if name not in DETERMINISTIC]


def synthetic_images(n: int = 8, seed: int = 0) -> np.ndarray:
    """Smooth natural-looking images: a tilted colour gradient, a disk and a rectangle."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32] / 31.0
    images = []
    for _ in range(n):
        tilt = rng.uniform(-0.3, 0.3, (2, 3))
        img = rng.uniform(0.2, 0.8, 3) + yy[..., None] * tilt[0] + xx[..., None] * tilt[1]
        cy, cx, radius = rng.uniform(8, 24), rng.uniform(8, 24), rng.uniform(4, 9)
        img[(yy * 31 - cy) ** 2 + (xx * 31 - cx) ** 2 <= radius**2] = rng.uniform(0, 1, 3)
        top, left = rng.integers(0, 20, 2)
        img[top : top + 8, left : left + 10] = rng.uniform(0, 1, 3)
        images.append(np.clip(img, 0, 1))
    return (np.stack(images) * 255).astype(np.uint8)


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    return synthetic_images()


def mean_change(out: np.ndarray, clean: np.ndarray) -> float:
    return float(np.abs(out.astype(np.float64) - clean).mean())


def test_names_in_paper_order() -> None:
    assert CORRUPTIONS == PAPER_ORDER


@pytest.mark.parametrize("name", PAPER_ORDER)
def test_shape_dtype_and_determinism(name: str, images: np.ndarray) -> None:
    for severity in (1, 5):
        first = corrupt(images, corruption=name, severity=severity, seed=0)
        again = corrupt(images, corruption=name, severity=severity, seed=0)
        assert first.dtype == np.uint8 and first.shape == images.shape
        np.testing.assert_array_equal(first, again)
    other = corrupt(images, corruption=name, severity=5, seed=1)
    if name in DETERMINISTIC:
        np.testing.assert_array_equal(first, other)
    else:
        assert not np.array_equal(first, other)


def test_input_is_not_modified(images: np.ndarray) -> None:
    before = images.copy()
    for name in PAPER_ORDER:
        corrupt(images, corruption=name, severity=5, seed=0)
    np.testing.assert_array_equal(images, before)


def test_batches_larger_than_a_chunk() -> None:
    big = synthetic_images(corr.CHUNK + 5, seed=3)
    for name in ("gaussian_noise", "pixelate"):
        out = corrupt(big, corruption=name, severity=3, seed=7)
        np.testing.assert_array_equal(out, corrupt(big, corruption=name, severity=3, seed=7))
        assert out.shape == big.shape and mean_change(out[-5:], big[-5:]) > 0


# Mean absolute change grows strictly with severity, except where the spec's constants do
# not make it grow:
# - motion_blur 3 -> 4: (R, S) = (6, 2) -> (8, 2); with sigma 2 the taps beyond radius 6
#   weigh exp(-13**2 / 8) < 1e-9, so both kernels are equal and only the random angle
#   differs (checked at a fixed angle below).
# - frost: the clean image's weight falls (1 -> 0.75) while the frost weight rises
#   (0.2 -> 0.45), so the change is not monotone; its formula is tested instead.
# - elastic_transform: the affine jitter shrinks (2.56 -> 0.96 px) while the elastic field
#   grows, so severity 1 moves pixels more than severity 5; pinned below.
NOT_INCREASING_STEPS = {"motion_blur": {3}}


@pytest.mark.parametrize("name", [n for n in PAPER_ORDER if n not in {"frost", "elastic_transform"}])
def test_change_increases_with_severity(name: str, images: np.ndarray) -> None:
    seeds = (0, 1, 2) if name in RANDOM else (0,)
    change = [
        np.mean([mean_change(corrupt(images, corruption=name, severity=s, seed=k), images) for k in seeds])
        for s in range(1, 6)
    ]
    for s in range(1, 5):
        if s not in NOT_INCREASING_STEPS.get(name, set()):
            assert change[s] > change[s - 1], (name, s, change)


def test_motion_kernel_at_fixed_angle(images: np.ndarray) -> None:
    angles = np.full(len(images), 20.0)
    change = [
        mean_change(corruption_kernels._motion_blur_u8(images, radius, sigma, angles), images)
        for radius, sigma in blur_corruptions.MOTION_BLUR
    ]
    assert change[0] < change[1] < change[2] <= change[3] < change[4]
    assert change[3] - change[2] < 1e-3


def test_elastic_severity_one_moves_more_than_five(images: np.ndarray) -> None:
    first = mean_change(corrupt(images, corruption="elastic_transform", severity=1, seed=0), images)
    last = mean_change(corrupt(images, corruption="elastic_transform", severity=5, seed=0), images)
    assert first > last > 0


# ----------------------------------------------------------------------------- formulas


def test_gaussian_noise_formula(images: np.ndarray) -> None:
    # Spec: x + N(0, c^2), clip, *255, truncate; c = 0.10 at severity 5.
    rng = np.random.default_rng([11, CORRUPTIONS.index("gaussian_noise"), 5])  # as documented in corrupt()
    noise = rng.normal(scale=0.10, size=images.shape)
    expected = (np.clip(images / 255.0 + noise, 0, 1) * 255).astype(np.uint8)
    np.testing.assert_array_equal(corrupt(images, corruption="gaussian_noise", severity=5, seed=11), expected)


def test_gaussian_noise_scale() -> None:
    gray = np.full((4, 32, 32, 3), 128, dtype=np.uint8)
    diff = corrupt(gray, corruption="gaussian_noise", severity=1, seed=0).astype(np.float64) - 128
    assert abs(diff.std() - 0.04 * 255) < 0.5


def test_shot_noise_moments() -> None:
    # Spec: Poisson(x * c) / c. For x = 128/255, out = 255 * count / c has mean 128 (less 0.5
    # from truncation) and std 255 * sqrt(x * c) / c.
    gray = np.full((8, 32, 32, 3), 128, dtype=np.uint8)
    for severity, c in ((1, 500), (5, 50)):
        out = corrupt(gray, corruption="shot_noise", severity=severity, seed=0).astype(np.float64)
        assert abs(out.mean() - 127.5) < 0.3
        assert abs(out.std() - 255 * np.sqrt(128 / 255 * c) / c) < 0.3


def test_shot_noise_alias_tables_are_poisson() -> None:
    stats = pytest.importorskip("scipy.stats")
    accept, alias, k = noise_corruptions._poisson_alias_table(50)
    accept, alias = accept.reshape(256, k), alias.reshape(256, k)
    pmf = accept / k
    for v in range(256):
        np.add.at(pmf[v], alias[v], (1 - accept[v]) / k)
    expected = stats.poisson.pmf(np.arange(k)[None, :], (np.arange(256) / 255 * 50)[:, None])
    np.testing.assert_allclose(pmf, expected, atol=1e-12)


def test_brightness_formula() -> None:
    # Spec: V := clip(V + c, 0, 1) in HSV, c = 0.3 at severity 5. With H and S fixed, RGB
    # scales by V'/V; black becomes gray V'.
    img = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    img[0, 0, :5] = [(100, 50, 25), (250, 10, 10), (255, 255, 255), (0, 200, 100), (0, 0, 0)]
    out = corrupt(img, corruption="brightness", severity=5, seed=0)[0, 0, :5]
    expected = [
        (176, 88, 44),  # V 0.392 -> 0.692: 176.5, 88.25, 44.1
        (255, 10, 10),  # V clipped at 1: scale 255/250 -> 10.2
        (255, 255, 255),
        (0, 255, 127),  # V clipped at 1: 100 * 255/200 = 127.5
        (76, 76, 76),  # 0.3 * 255 = 76.5
    ]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.uint8))


def test_contrast_formula() -> None:
    # Spec: (x - channel mean) * c + mean, c = 0.15 at severity 5. Red: half 0, half 255, so
    # mean 0.5 -> 0.425 (108.4) and 0.575 (146.6); blue all 0 stays 0.
    img = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    img[0, :, 16:, 0] = 255
    out = corrupt(img, corruption="contrast", severity=5, seed=0)[0]
    assert (out[:, :16, 0] == 108).all() and (out[:, 16:, 0] == 146).all()
    assert (out[..., 2] == 0).all()


def test_pixelate_formula() -> None:
    # Spec: box-downsample to int(32 * 0.65) = 20, box-upsample to 32. A column of 160 at
    # x = 15 falls with x = 14 into the box of output 9 (pixel centres in (14.4, 16]):
    # (0 + 160) / 2 = 80. Upsampling maps outputs x = 14, 15 (centres 9.06, 9.69) to it.
    img = np.zeros((1, 32, 32, 3), dtype=np.uint8)
    img[0, :, 15] = 160
    out = corrupt(img, corruption="pixelate", severity=5, seed=0)[0]
    expected = np.zeros_like(out)
    expected[:, 14:16] = 80
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_pixelate_equals_pillow_per_image(severity: int) -> None:
    rand = np.random.default_rng(severity).integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
    small = int(32 * digital_corruptions.PIXELATE[severity - 1])
    expected = np.stack(
        [
            np.asarray(Image.fromarray(im).resize((small, small), Image.BOX).resize((32, 32), Image.BOX))
            for im in rand
        ]
    )
    np.testing.assert_array_equal(corrupt(rand, corruption="pixelate", severity=severity, seed=0), expected)


def test_jpeg_equals_pillow_round_trip(images: np.ndarray) -> None:
    expected = []
    for im in images:
        buffer = io.BytesIO()
        Image.fromarray(im).save(buffer, "JPEG", quality=40)
        buffer.seek(0)
        expected.append(np.asarray(Image.open(buffer)))
    out = corrupt(images, corruption="jpeg_compression", severity=5, seed=0)
    np.testing.assert_array_equal(out, expected)


def test_frost_is_linear_in_the_clean_image() -> None:
    # Spec: a * x + b * frost on the 0..255 scale; draws do not depend on pixel values, so two
    # constant images get the same crops and differ by a * (x1 - x2) up to truncation.
    low = np.full((4, 32, 32, 3), 40, dtype=np.uint8)
    high = np.full((4, 32, 32, 3), 100, dtype=np.uint8)
    for severity in (1, 5):
        a, b = weather_corruptions.FROST[severity - 1]
        out_low = corrupt(low, corruption="frost", severity=severity, seed=3).astype(int)
        out_high = corrupt(high, corruption="frost", severity=severity, seed=3).astype(int)
        unclipped = out_high < 255
        assert np.abs(out_high - out_low - a * 60)[unclipped].max() <= 1
        assert out_low.min() >= int(a * 40) and out_low.max() <= int(a * 40 + b * 255)


def test_impulse_noise_fraction() -> None:
    gray = np.full((8, 32, 32, 3), 128, dtype=np.uint8)
    out = corrupt(gray, corruption="impulse_noise", severity=5, seed=0)
    flipped = out != 128
    assert abs(flipped.mean() - 0.07) < 0.01
    assert set(np.unique(out[flipped])) <= {0, 255}


# ----------------------------------------------------------------------------- errors


def test_unknown_corruption_lists_valid_names(images: np.ndarray) -> None:
    with pytest.raises(ValueError) as info:
        corrupt(images, corruption="spatter", severity=1, seed=0)
    assert all(name in str(info.value) for name in PAPER_ORDER)


@pytest.mark.parametrize("severity", [0, 6, -1, 2.5, True, "3"])
def test_invalid_severity(severity: object, images: np.ndarray) -> None:
    with pytest.raises(ValueError, match="1..5"):
        corrupt(images, corruption="contrast", severity=severity, seed=0)  # type: ignore[arg-type]


def test_invalid_images() -> None:
    with pytest.raises(TypeError):
        corrupt(np.zeros((2, 32, 32, 3), dtype=np.float32), corruption="contrast", severity=1, seed=0)
    with pytest.raises(ValueError):
        corrupt(np.zeros((2, 28, 28, 3), dtype=np.uint8), corruption="contrast", severity=1, seed=0)


def test_frost_without_package_names_it(monkeypatch: pytest.MonkeyPatch, images: np.ndarray) -> None:
    weather_corruptions._frost_layers.cache_clear()
    monkeypatch.setattr(weather_corruptions.importlib.util, "find_spec", lambda name: None)
    try:
        with pytest.raises(ModuleNotFoundError, match="pip install imagecorruptions-imaug"):
            corrupt(images, corruption="frost", severity=1, seed=0)
    finally:
        weather_corruptions._frost_layers.cache_clear()


# ----------------------------------------------------------------------------- held-out extras


def test_holdout_corruptions_are_outside_the_test_set_and_reproducible(images) -> None:
    from dartlib.data.corruptions import HOLDOUT_CORRUPTIONS

    assert set(HOLDOUT_CORRUPTIONS) == {"speckle_noise", "gaussian_blur", "saturate"}
    assert not set(HOLDOUT_CORRUPTIONS) & set(CORRUPTIONS)
    for name in HOLDOUT_CORRUPTIONS:
        out = corrupt(images, corruption=name, severity=5, seed=3)
        assert out.dtype == np.uint8 and out.shape == images.shape
        assert np.array_equal(out, corrupt(images, corruption=name, severity=5, seed=3))
        assert mean_change(out, images) > 1.0
    with pytest.raises(ValueError, match="saturate"):
        corrupt(images, corruption="spatter", severity=5, seed=0)


def test_speckle_noise_scales_with_intensity_and_severity(images) -> None:
    black = np.zeros((4, 32, 32, 3), np.uint8)
    assert np.array_equal(corrupt(black, corruption="speckle_noise", severity=5, seed=0), black)  # x * noise = 0
    weak = mean_change(corrupt(images, corruption="speckle_noise", severity=1, seed=0), images)
    strong = mean_change(corrupt(images, corruption="speckle_noise", severity=5, seed=0), images)
    assert strong > 2 * weak


def test_gaussian_blur_keeps_flat_images_and_smooths_edges(images) -> None:
    flat = np.full((2, 32, 32, 3), 200, np.uint8)
    assert np.abs(corrupt(flat, corruption="gaussian_blur", severity=5, seed=0).astype(int) - 200).max() <= 1
    step = np.zeros((1, 32, 32, 3), np.uint8)
    step[:, :, 16:] = 255
    jump = lambda x: np.abs(np.diff(x.astype(int), axis=2)).max()  # noqa: E731
    assert jump(step) == 255
    assert jump(corrupt(step, corruption="gaussian_blur", severity=1, seed=0)) < 255 * 0.95  # sigma 0.4
    assert jump(corrupt(step, corruption="gaussian_blur", severity=5, seed=0)) < 255 * 0.45  # sigma 1


def test_saturate_scales_the_hsv_saturation(images) -> None:
    spread = lambda x: (x.max(-1).astype(int) - x.min(-1)).mean()  # noqa: E731  (max - min = V * S, 0..255)
    grey = corrupt(images, corruption="saturate", severity=2, seed=0)  # S * 0.1
    vivid = corrupt(images, corruption="saturate", severity=5, seed=0)  # S * 2.5 + 0.2
    assert spread(grey) < 0.15 * spread(images) + 1
    assert spread(vivid) > 1.5 * spread(images)
    assert np.array_equal(grey.max(-1), images.max(-1)) or np.abs(grey.max(-1).astype(int) - images.max(-1)).max() <= 1


_SAME_ON_ANOTHER_CPU = """
import hashlib, sys
import numpy as np
from dartlib.data.corruptions import CORRUPTIONS, corrupt
from tests.test_corruptions import synthetic_images
images = synthetic_images(n=256)
for name in CORRUPTIONS:
    print(name, hashlib.sha256(corrupt(images, corruption=name, severity=5, seed=3).tobytes()).hexdigest())
"""


def _dispatched_features() -> list[str]:
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]


def test_every_corruption_is_bit_identical_on_a_cpu_without_the_wide_kernels() -> None:
    """What another CPU type would compute: OpenBLAS's generic x86 kernel (``OPENBLAS_CORETYPE``)
    and NumPy without its AVX2 / AVX-512 loops (``NPY_DISABLE_CPU_FEATURES``), in a subprocess."""
    import os
    import platform
    import subprocess
    import sys
    from pathlib import Path

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the generic-kernel settings below are x86 ones")
    root = Path(__file__).resolve().parents[1]

    def digests(env: dict[str, str]) -> str:
        out = subprocess.run([sys.executable, "-c", _SAME_ON_ANOTHER_CPU], cwd=root, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(root), **env}, check=True)
        return out.stdout

    native = digests({})
    generic = digests({"OPENBLAS_CORETYPE": "Prescott", "NPY_DISABLE_CPU_FEATURES": " ".join(_dispatched_features())})
    assert len(native.splitlines()) == len(CORRUPTIONS)
    differ = [a.split()[0] for a, b in zip(native.splitlines(), generic.splitlines()) if a != b]
    assert not differ, f"generated differently on a CPU without the wide kernels: {differ}"
