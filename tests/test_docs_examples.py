"""docs/using-dart.md runs as written: every ```python block, in order, in one namespace (as a
reader pasting them into one session would), with the refiner cache in a temporary folder."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from dartlib.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "using-dart.md"


def python_blocks(text: str) -> list[str]:
    """The bodies of the fenced ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_python_blocks_are_found_whole():
    text = "a\n```python\nx = 1\n\ny = 2\n```\n```bash\nls\n```\n```python\nz = 3\n```\n"
    assert python_blocks(text) == ["x = 1\n\ny = 2\n", "z = 3\n"]


@pytest.fixture(scope="module")
def doc_namespace(tmp_path_factory):
    """The namespace after the page's blocks ran, what each block printed, and the cache folder."""
    pytest.importorskip("torch")
    from dartlib.data.sources import load
    from dartlib.data.dataset import DataMissingError

    try:
        load("fmnist", split="test")
    except DataMissingError as err:
        pytest.skip(f"the page reads Fashion-MNIST: {err}")
    cache = tmp_path_factory.mktemp("refiners")
    namespace: dict = {"__name__": "using_dart"}
    printed = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("dartlib.dart.fit.default_cache_dir", lambda: cache)
        patch.setenv("DART_DEVICE", "cpu")
        for i, block in enumerate(python_blocks(DOC.read_text())):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, f"{DOC.name}, python block {i + 1}", "exec"), namespace)
            printed.append(out.getvalue())
        yield namespace, printed, cache


def test_every_python_block_of_using_dart_runs_in_order(doc_namespace):
    namespace, printed, cache = doc_namespace
    assert len(printed) == 6, "the page's six examples: model, fit, refusal, streams, one batch, alpha"
    fitted = namespace["fitted"]
    # 1,000 class-balanced images in batches of 64: 15 steps per epoch, 2 epochs
    assert len(fitted.log) == 30 and not fitted.reused
    assert fitted.path.parent == cache and fitted.path.is_file()
    assert printed[1].strip() == f"{fitted.path.name} trained in 30 steps"
    # the refusal names the value that works: 1,000 images, 20 per chunk
    assert "DartConfig(n_dir=250)" in printed[2] and "needs 2500 images" in printed[2]
    assert "use DartConfig(n_dir=50)" in printed[2]
    lines = printed[3].strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["bnadapt", "bnadapt+DART", "tent", "tent+DART"]
    accuracies = [float(line.split(": ")[1].split("%")[0]) for line in lines]
    assert all(0.0 <= a <= 100.0 for a in accuracies) and all("on 1000 images" in line for line in lines)
    # one batch of 200: logits (200, 10), and the predicted classes' counts sum to 200
    assert printed[4].startswith("(200, 10) [")
    assert sum(int(n) for n in printed[4].split("[")[1].split("]")[0].split(",")) == 200
    # the alpha rule's verdict, then the gains per candidate (rows) and rho (columns)
    choice = namespace["choice"]
    assert printed[5].startswith("  alpha  gain, no shift    gain, shifted     score")
    assert f"\nalpha = {choice.alpha:g}: DART's gain over BNAdapt on held-out batches" in printed[5]
    assert choice.alpha in (0.1, 1.0, 10.0) and sorted(choice.table.alpha.unique()) == [0.1, 1.0, 10.0]
    assert list(choice.gains().columns) == [1.0, 10.0, 100.0]
    assert choice.table.n.tolist()[:3] == [1000] * 3  # the validation images, all at rho 1
    # the page's table: this model, validation images held out, the rule picks 10 and DART does not help
    assert choice.alpha == 10.0 and not choice.helps
    assert "DART does not help this model on the held-out data" in printed[5]


def test_the_page_reads_its_refiner_back_from_the_cache(doc_namespace):
    """The same model and data: the second call reads the refiner the first one saved."""
    namespace, _, cache = doc_namespace
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("dartlib.dart.fit.default_cache_dir", lambda: cache)
        again = namespace["fit_refiner"](model=namespace["model"], data=(namespace["x_train"], namespace["y_train"]),
                                         num_classes=10, device="cpu", config=namespace["config"])
    assert again.reused and again.path == namespace["fitted"].path
    assert len([p for p in cache.glob("*.pt") if "fit-" not in p.name]) == 1  # select_alpha's are tagged
