"""What an executed notebook showed was made from: the files it read (results rows and their
per-image outcomes, the paper's numbers and claims, trained artefacts) and the library code it ran,
each with its sha256, kept in the notebook's metadata (``metadata.dart.inputs``).

The runner sets :data:`READS_ENV` for the kernel; importing :mod:`dartlib` there then records every
file of the repository the kernel opens (an audit hook on ``open``, PEP 578). After the notebook ran,
:func:`input_digests` turns that list into digests. :func:`stale_inputs` compares a notebook's
digests with the files as they are now: a published notebook whose rows, ledger, artefacts or code
changed since it ran is stale and must be executed again (``tests/test_pages_current.py``).

A page also depends on the profile it ran with, but only on the values its notebook reads: the
runner keeps the parameters it injected (``metadata.dart.parameters``), and
:func:`stale_parameters` compares them with the profile as it is now (its file and the ``extends``
chain, :func:`dartlib.profiles.load_profile`), so that a profile edit makes stale exactly the pages
whose notebook reads a changed value. A page executed before that record was kept is judged by the
parameters cell papermill injected into it (tagged ``injected-parameters``), which holds the same
values as Python literals.
"""

from __future__ import annotations

import ast
import hashlib
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from dartlib.paths import REPO_ROOT

READS_ENV = "DART_READS_LOG"  # listed in dartlib.environment.VARIABLES
# the parts of the repository whose files decide what a page shows
_TRACKED = ("results", "data/paper", "data/checkpoints", "dartlib")
# A manifest only vouches for files a page reads itself, and those are recorded with their own digest;
# recording the whole list would make every page stale each time a trained file is added to it.
_NOT_INPUTS = ("MANIFEST.json",)


def _tracked(path: Path) -> str | None:
    """``path`` relative to the repository where it is one of :data:`_TRACKED`'s files (a compiled
    module stands for its source), else None."""
    try:
        rel = path.resolve().relative_to(REPO_ROOT)
    except (ValueError, OSError):
        return None
    parts = rel.parts
    if "__pycache__" in parts and rel.suffix == ".pyc":  # dartlib/x/__pycache__/y.cpython-311.pyc -> dartlib/x/y.py
        rel = rel.parent.parent / f"{rel.name.split('.')[0]}.py"
        parts = rel.parts
    if (any(p.startswith(".") for p in parts) or rel.suffix in (".lock",) or "notebooks" in parts[:3]
            or rel.name in _NOT_INPUTS):
        return None
    text = rel.as_posix()
    return text if any(text == t or text.startswith(t + "/") for t in _TRACKED) else None


def record_reads(log: Path) -> None:
    """Append to ``log`` each tracked file this process opens from now on (once each)."""
    seen: set[str] = set()
    busy = [False]

    def hook(event: str, args: tuple) -> None:
        if event != "open" or busy[0] or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        busy[0] = True
        try:
            rel = _tracked(Path(os.fsdecode(args[0])))
            if rel is not None and rel not in seen:
                seen.add(rel)
                with open(log, "a", encoding="utf-8") as sink:
                    sink.write(rel + "\n")
        finally:
            busy[0] = False

    sys.addaudithook(hook)
    record_setting_reads(log)


SETTING_MARK = "S:"  # a line of the reads log naming a setting the kernel read and its value (JSON)


def record_setting_reads(log: Path) -> None:
    """Append to ``log`` each setting this process reads from the settings tree from now on (once
    each), as ``S:key=<value as JSON>`` (the value the code read, which a study may have derived
    from the profile's). The runner records the profile's value of each (a page depends on it), so
    that a profile edit makes stale exactly the pages that read the value (:func:`stale_parameters`)."""
    import json

    from dartlib import settings_tree

    seen: set[str] = set()

    def note(key: str, value: object) -> None:
        if key not in seen:
            seen.add(key)
            with open(log, "a", encoding="utf-8") as sink:
                sink.write(f"{SETTING_MARK}{key}={json.dumps(value, separators=(',', ':'))}\n")

    settings_tree.on_read = note


def setting_reads(lines: Iterable[str]) -> dict[str, object]:
    """The settings a reads log's ``lines`` record (:func:`record_setting_reads`), by key."""
    import json

    found = {}
    for line in lines:
        if line.startswith(SETTING_MARK):
            key, _, value = line[len(SETTING_MARK):].partition("=")
            found[key] = json.loads(value)
    return found


OUTPUT_MARK = "W:"  # a line of the reads log naming a file the kernel wrote (a figure), not one it read


def record_output(path: Path) -> None:
    """Note in the running page's log (:data:`READS_ENV`, where the runner set it) that the kernel
    wrote ``path`` (a figure: :func:`dartlib.reporting.figures.save_figure`), so that the page keeps
    its sha256 (``metadata.dart.outputs``) and a figure is checked as the page that drew it is."""
    log = os.environ.get(READS_ENV)
    if not log:
        return
    try:
        rel = Path(path).resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return  # written outside the repository (a run with --output elsewhere): not a committed figure
    with open(log, "a", encoding="utf-8") as sink:
        sink.write(f"{OUTPUT_MARK}{rel}\n")


def cpu_model_name() -> str:
    """The CPU's model as ``lscpu`` names it ("Model name", ``/proc/cpuinfo``'s ``model name``),
    recorded beside what was trained on it: training's result depends on the CPU's arithmetic."""
    import platform

    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def input_digests(paths: Iterable[str]) -> dict[str, str]:
    """{path relative to the repository: sha256} of the files of ``paths`` that exist (a file that was
    opened for writing and then replaced, or a temporary one, is left out)."""
    out = {}
    for rel in sorted(set(paths)):
        path = REPO_ROOT / rel
        if path.is_file() and ".tmp" not in path.name:
            out[rel] = sha256_file(path)
    return out


def stale_inputs(recorded: dict[str, str], *, root: Path = REPO_ROOT) -> list[str]:
    """The recorded inputs whose file (under ``root``) is gone or holds other bytes now, as
    "path (changed|missing)"."""
    out = []
    for rel, digest in sorted(recorded.items()):
        if Path(rel).name in _NOT_INPUTS:  # recorded by pages executed before it was left out
            continue
        path = root / rel
        if not path.is_file():
            out.append(f"{rel} (missing)")
        elif sha256_file(path) != digest:
            out.append(f"{rel} (changed)")
    return out


def stale_outputs(pages: Mapping[str, Mapping[str, str]], *, files: Iterable[Path], root: Path = REPO_ROOT) -> list[str]:
    """The figure ``files`` that are not what a page drew: written by none of ``pages`` ({page:
    its ``metadata.dart.outputs``}: a figure left over from code or settings that no longer draw
    it), or holding other bytes than the page recorded (drawn again, or edited, since)."""
    drawn = {rel: (page, digest) for page, outputs in pages.items() for rel, digest in outputs.items()}
    out = []
    for path in sorted(files):
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
        if rel not in drawn:
            out.append(f"{rel}: drawn by no published page (delete it, or run the notebook that draws it)")
        elif sha256_file(path) != drawn[rel][1]:
            out.append(f"{rel}: not what {drawn[rel][0]} drew (run it again, or restore the figure)")
    return out


def recorded_parameters(nb: Mapping) -> dict[str, object] | None:
    """The profile values an executed notebook ``nb`` ran with: ``metadata.dart.parameters``, or for
    a page executed before that record, the assignments of its ``injected-parameters`` cell; None
    when it holds neither (a notebook run with its own defaults)."""
    dart = nb.get("metadata", {}).get("dart", {})
    if "parameters" in dart:
        return dict(dart["parameters"])
    injected = [c for c in nb.get("cells", []) if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    if not injected:
        return None
    values = {}
    for node in ast.parse(injected[0]["source"]).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def stale_parameters(recorded: Mapping[str, object], current: Mapping[str, object]) -> list[str]:
    """The recorded profile values that the profile (``current``, :func:`dartlib.profiles.load_profile`)
    no longer holds, as "profile value KEY (OLD -> NEW)" or "profile value KEY (gone)"."""
    out = []
    for key, value in sorted(recorded.items()):
        if key not in current:
            out.append(f"profile value {key} (gone)")
        elif not _same(current[key], value):
            out.append(f"profile value {key} ({value!r} -> {current[key]!r})")
    return out


def _same(a: object, b: object) -> bool:
    """Equal as YAML and the injected literals hold them (a list and a tuple of equal items alike, a
    bool never equal to a number)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b
