"""Run the numbered notebooks with papermill, one at a time, for one profile.

Executed copies go to ``runs/<profile>/`` (never over the committed notebooks); the kernel is
``python3`` started in the repository root. ``refresh_notebooks`` re-executes the committed
notebooks in place with their own (smoke) parameters so that nbval has current references.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import nbformat
import papermill as pm
from jupyter_client.manager import AsyncKernelManager
from papermill.engines import NBClientEngine, papermill_engines
from papermill.exceptions import PapermillExecutionError
from tqdm import tqdm

from dartlib.data.files import temporary_name
from dartlib.provenance import OUTPUT_MARK, READS_ENV, SETTING_MARK, input_digests, setting_reads
from dartlib.paths import NOTEBOOKS_DIR, OUTPUT_DIR_ENV, OUTPUT_PROFILE_ENV, REPO_ROOT, output_root, runs_dir
from dartlib.profiles import ProfileError
from dartlib.registry import UnknownNameError, unknown_name_message
from dartlib.schema import check_values, checked_profile
from dartlib.settings_tree import OVERRIDES, SettingsTree

KERNEL = "python3"
CELL_ENGINE = "dartlib-cells"  # papermill's nbclient engine, reporting each cell (the runner's bar shows it)


def notebook_paths() -> list[Path]:
    """The numbered notebooks ``notebooks/NN_*.ipynb`` in order."""
    return sorted(p for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def resolve_notebooks(names: list[str] | None) -> list[Path]:
    """Notebooks named by number (``01``), stem (``01_toy_gaussian``), file name or title
    (``toy_gaussian``); all of them, in order, when ``names`` is empty."""
    available = notebook_paths()
    if not names:
        return available
    chosen: list[Path] = []
    for name in names:
        key = Path(name).name.removesuffix(".ipynb")
        match = [p for p in available if key in (p.stem, p.stem[:2], p.stem[3:])]
        if not match:
            raise UnknownNameError(unknown_name_message("notebook", name, [p.stem for p in available]))
        chosen.extend(m for m in match if m not in chosen)
    return sorted(chosen)


def notebook_parameters(path: Path) -> dict[str, object]:
    """Names and default values of a notebook's ``parameters`` cell."""
    return {name: info["default"] for name, info in pm.inspect_notebook(str(path)).items()}


@dataclass
class NotebookRun:
    notebook: str
    seconds: float
    status: str  # "ok", "failed", "stopped" (by the time guard), "not run"
    detail: str = ""
    error: str = ""  # a failed notebook's exception class (DamagedFileError: the command exits 4, as a grid does)


def parse_override(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of ``run --set``: the value read as a YAML scalar or list (``3``, ``0.1``,
    ``true``, ``[gaussian_noise]``, ``resnet26-w8``), as the profile file would hold it."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ProfileError(f"--set {text!r}: expected KEY=VALUE, e.g. --set dart_epochs=2")
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        raise ProfileError(f"--set {text!r}: the value is not a YAML value") from None


def read_overrides(path: Path) -> dict[str, object]:
    """A YAML file of profile keys and values (``run --overrides``), e.g. a profile's tiny dry-run
    settings (``notebooks/profiles/dry-run/<profile>.yaml``)."""
    import yaml

    from dartlib.profiles import load_yaml

    try:
        values = load_yaml(Path(path)) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ProfileError(f"--overrides {path}: cannot be read as YAML ({err})") from None
    if not isinstance(values, dict):
        raise ProfileError(f"--overrides {path}: expected `key: value` lines")
    return values


def overridden(params: dict[str, object], overrides: dict[str, object], *, profile: str) -> dict[str, object]:
    """A profile's checked ``params`` with ``overrides`` on top, checked again as a whole (type,
    range and names of each key, :func:`dartlib.schema.check_values`); the name stays the profile's."""
    if "profile" in overrides and overrides["profile"] != profile:
        raise ProfileError("--set profile=...: the profile's name cannot be overridden; "
                           "--output DIR keeps an overridden run's outputs apart")
    values = {**params, **overrides}
    check_values(values, file=Path(f"{profile} with --set"))
    return values


class TimeGuard:
    """A wall-clock budget for a whole run: each cell may wait at most for what is left, then the
    kernel is interrupted (a KeyboardInterrupt in the cell: grids keep every row finished before
    it, :mod:`dartlib.experiments.grid`) and no later notebook starts."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def spent(self) -> bool:
        left = self.left()
        return left is not None and left <= 0

    def cell_timeout(self, cell: object = None) -> float | None:
        """nbclient's ``timeout_func``: the seconds a cell may run (None: no limit); once the budget
        is spent, a hundredth of a second (nbclient reads 0 as no limit)."""
        left = self.left()
        return None if left is None else max(0.01, left)

    def client_options(self) -> dict[str, object]:
        """papermill/nbclient options that apply the guard (none without a budget)."""
        if self.deadline is None:
            return {}
        return {"timeout_func": self.cell_timeout, "interrupt_on_timeout": True}


def _kernel_env() -> None:
    # Progress bars inside executed notebooks would only add carriage-return noise.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")


def kernel_log_path(output: Path) -> Path:
    """Where the kernel process's own log lines go while ``output`` is executed."""
    return output.parent / "kernel-logs" / f"{output.name.split('.')[0]}.log"


def _kernel_manager_logging_to(log: Path) -> type[AsyncKernelManager]:
    """A kernel manager whose kernel writes its process-level output to ``log``.

    The kernel's own log lines ("Kernel is running over TCP without encryption",
    "KeyboardInterrupt caught in kernel") would otherwise land between the runner's progress
    lines; cell outputs and cell errors travel over the kernel protocol and are not affected."""

    class _Manager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: object) -> None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as sink:
                await super()._async_launch_kernel(kernel_cmd, **{**kw, "stdout": sink, "stderr": sink})

    return _Manager


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


@dataclass(frozen=True)
class CellProgress:
    """Where a notebook's execution stands: ``done`` of its ``total`` code cells have run and
    ``current`` is the first line of the cell now running ("" once all have run)."""

    done: int
    total: int
    current: str

    def __str__(self) -> str:
        shown = f" `{self.current}`" if self.current else ""
        return f"cell {self.done}/{self.total}{shown}"


def cell_head(source: str, width: int = 50) -> str:
    """The first line of a cell that is neither blank nor a comment, cut to ``width`` characters."""
    lines = [line.strip() for line in source.splitlines()]
    code = [line for line in lines if line and not line.startswith("#")] or [line for line in lines if line] or [""]
    head = code[0]
    return head if len(head) <= width else head[: width - 3] + "..."


class _CellReportingEngine(NBClientEngine):
    """papermill's own engine, telling ``on_cell`` (a :class:`CellProgress` callback) as each code
    cell starts and after the last one has run."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, on_cell=None, **kwargs):
        if on_cell is not None:
            _report_cells(nb_man, on_cell)
        return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)


def _report_cells(nb_man, on_cell: Callable[[CellProgress], None]) -> None:
    code = [i for i, cell in enumerate(nb_man.nb.cells) if cell.get("cell_type") == "code"]
    position = {index: n for n, index in enumerate(code)}
    started, completed = nb_man.cell_start, nb_man.cell_complete

    def cell_start(cell, cell_index=None, **kw):
        started(cell, cell_index, **kw)
        if cell_index in position:
            on_cell(CellProgress(position[cell_index], len(code), cell_head(cell.source)))

    def cell_complete(cell, cell_index=None, **kw):
        completed(cell, cell_index, **kw)
        if code and cell_index == code[-1]:
            on_cell(CellProgress(len(code), len(code), ""))

    nb_man.cell_start, nb_man.cell_complete = cell_start, cell_complete


papermill_engines.register(CELL_ENGINE, _CellReportingEngine)


def _execute(path: Path, output: Path, parameters: dict[str, object], *, log: Path,
             on_cell: Callable[[CellProgress], None] | None = None, guard: TimeGuard | None = None,
             values: Mapping[str, object] | None = None) -> None:
    """Execute ``path`` into ``output`` with papermill; ``on_cell`` hears each code cell start;
    ``guard`` bounds every cell by the run's time left. The executed notebook's metadata keeps the
    files it read and the code it ran, with their sha256 (``metadata.dart.inputs``), the figures it
    wrote (``metadata.dart.outputs``) and the profile values it depends on (``metadata.dart.parameters``,
    :mod:`dartlib.provenance`): those it was given, and ``values``' value (the run's profile) of each
    setting its code read through the settings tree, directly or through settings derived from them."""
    reads = log.with_suffix(".reads")
    reads.parent.mkdir(parents=True, exist_ok=True)
    reads.unlink(missing_ok=True)
    previous = os.environ.get(READS_ENV)
    os.environ[READS_ENV] = str(reads)  # the kernel inherits it
    try:
        pm.execute_notebook(
            str(path),
            str(output),
            parameters=parameters,
            engine_name=CELL_ENGINE,
            kernel_name=KERNEL,
            cwd=str(REPO_ROOT),
            progress_bar=False,
            log_output=False,
            kernel_manager_class=_kernel_manager_logging_to(log),
            on_cell=on_cell,
            **(guard.client_options() if guard is not None else {}),
        )
    finally:
        if previous is None:
            os.environ.pop(READS_ENV, None)
        else:
            os.environ[READS_ENV] = previous
    lines = reads.read_text().splitlines() if reads.is_file() else []
    read = [line for line in lines if not line.startswith((OUTPUT_MARK, SETTING_MARK))]
    wrote = [line[len(OUTPUT_MARK):] for line in lines if line.startswith(OUTPUT_MARK)]
    nb = nbformat.read(output, as_version=4)
    read_settings = setting_reads(lines)
    depends = {k: values[k] for k in read_settings if k in values} if values is not None else read_settings
    nb.metadata["dart"] = {"inputs": input_digests(read), "outputs": input_digests(wrote),
                           "parameters": {**depends, **{k: v for k, v in parameters.items() if k != OVERRIDES}}}
    nbformat.write(nb, output)


def _failure_detail(err: PapermillExecutionError) -> str:
    lines = [line for line in err.source.splitlines() if line.strip()]
    head = lines[0].strip() if lines else ""
    return f"cell In[{err.exec_count}] `{head[:60]}`: {err.ename}: {err.evalue}"


def published_dir(profile: str) -> Path:
    """``results/<profile>/notebooks/``: the executed notebooks kept with a profile's results
    (the results book is built from them); the smoke profile's are the committed notebooks."""
    if profile == "smoke":
        raise ProfileError("run --publish: the smoke profile's executed notebooks are the committed ones "
                           "(notebooks/): update them with `python -m dartlib refresh`, or run without --publish")
    return output_root(profile) / "results" / profile / "notebooks"


def publish(executed: Path, *, profile: str) -> Path:
    """Copy an executed notebook, without run timings, to :func:`published_dir`."""
    folder = published_dir(profile)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / executed.name
    tmp = temporary_name(target)
    try:
        nbformat.write(strip_run_metadata(nbformat.read(executed, as_version=4)), tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def set_output(profile: str, output: Path | None) -> None:
    """Send ``profile``'s results/, figures/ and runs/ under ``output`` (:func:`dartlib.paths.output_root`)
    for this process and the kernels it starts; ``None`` leaves them in the repository."""
    if output is None:
        return
    os.environ[OUTPUT_DIR_ENV] = str(Path(output).expanduser().resolve())
    os.environ[OUTPUT_PROFILE_ENV] = profile


def check_override_output(*, profile: str, overrides: dict[str, object] | None, output: Path | None) -> None:
    """Refuse a run with ``overrides`` (``run --set``) whose rows would land in the repository's own
    ``results/<profile>/``: no ``output`` folder, or one whose ``results/<profile>`` is that folder
    (``--output .``, the repository root by another path, or a link to it)."""
    if not overrides:
        return
    if output is None:
        raise ProfileError(f"--set changes what profile {profile!r} computes: give --output DIR, so that its "
                           f"rows do not replace those of results/{profile}/")
    target = (Path(output).expanduser().resolve() / "results" / profile).resolve()
    if target == (REPO_ROOT / "results" / profile).resolve():
        raise ProfileError(f"an overridden run (--set or --overrides) with --output {output}: its rows would land in "
                           f"the committed {REPO_ROOT / 'results' / profile}; give another --output folder (outside the "
                           f"repository, or one of its own such as results/{profile}/<variant>)")


def run_profile(
    *, profile: str, notebooks: list[str] | None = None, keep_going: bool = False, publish_runs: bool = False,
    overrides: dict[str, object] | None = None, output: Path | None = None, budget: float | None = None,
) -> list[NotebookRun]:
    """Execute the chosen notebooks (none named: the profile's ``notebooks`` list, else all) in order
    with the profile's parameters; with ``publish_runs`` each notebook that ran through is also
    copied to ``results/<profile>/notebooks/``.

    ``overrides`` (profile keys) replace the profile's values; such a run must name an ``output``
    folder (its results/, figures/ and runs/ go there), so that its rows never replace the
    profile's own. ``budget`` (seconds) is the time guard (:class:`TimeGuard`): the cell running
    when it is spent is interrupted, its notebook reported ``stopped``, later ones ``not run``."""
    check_override_output(profile=profile, overrides=overrides, output=output)
    set_output(profile, output)
    if publish_runs:
        published_dir(profile)
    params = checked_profile(profile)  # before any notebook runs
    if overrides:
        params = overridden(params, overrides, profile=profile)
    paths = resolve_notebooks(notebooks or [str(n) for n in SettingsTree.from_values(params).run.notebooks])  # the profile's list
    out_dir = runs_dir(profile)
    _kernel_env()
    guard = TimeGuard(budget)
    runs: list[NotebookRun] = []
    failed = False
    bar = tqdm(paths, desc=f"notebooks ({profile})", unit="nb")  # TQDM_DISABLE=1 silences it
    for path in bar:
        if failed and not keep_going:
            runs.append(NotebookRun(path.stem, 0.0, "not run", "an earlier notebook failed"))
            continue
        if guard.spent():
            runs.append(NotebookRun(path.stem, 0.0, "not run", f"the time guard's {budget:g} s were spent"))
            continue
        bar.set_postfix_str(path.stem)
        wanted = notebook_parameters(path)
        chosen = {k: v for k, v in params.items() if k in wanted}
        handed = {k: v for k, v in (overrides or {}).items() if k not in wanted}  # read through the settings tree
        if handed:
            chosen[OVERRIDES] = handed
        start = time.perf_counter()
        log = kernel_log_path(out_dir / path.name)
        log.unlink(missing_ok=True)
        def show(progress: CellProgress, stem: str = path.stem) -> None:
            bar.set_postfix_str(f"{stem}: {progress}")  # cells done of total, and the one running

        try:
            _execute(path, out_dir / path.name, chosen, log=log, on_cell=show, guard=guard, values=params)
            if publish_runs:
                publish(out_dir / path.name, profile=profile)
            runs.append(NotebookRun(path.stem, time.perf_counter() - start, "ok"))
        except PapermillExecutionError as err:
            if guard.spent() and err.ename == "KeyboardInterrupt":
                runs.append(NotebookRun(path.stem, time.perf_counter() - start, "stopped",
                                        f"the time guard's {budget:g} s were spent in {_failure_detail(err)}; finished "
                                        "grid rows are kept: run the same command again to resume"))
                continue
            failed = True
            runs.append(NotebookRun(path.stem, time.perf_counter() - start, "failed",
                                    f"{_failure_detail(err)} (kernel log: {_shown(log)})", err.ename))
    return runs


def format_summary(runs: list[NotebookRun]) -> str:
    width = max([len(r.notebook) for r in runs] + [8])
    lines = [f"{'notebook':<{width}}  {'seconds':>8}  status"]
    for r in runs:
        detail = f"  {r.detail}" if r.detail else ""
        lines.append(f"{r.notebook:<{width}}  {r.seconds:8.1f}  {r.status}{detail}")
    return "\n".join(lines)


_VOLATILE_CELL_KEYS = ("papermill", "execution")


def strip_run_metadata(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop papermill/nbclient timing metadata and empty tag lists; keep outputs and counts
    (nbval needs the execution counts of its reference cells)."""
    nb.metadata.pop("papermill", None)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": KERNEL}
    for cell in nb.cells:
        for key in _VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)
        if cell.metadata.get("tags") == []:
            cell.metadata.pop("tags")
    return nb


def refresh_notebooks(notebooks: list[str] | None = None) -> list[NotebookRun]:
    """Re-execute committed notebooks with their own parameters (the smoke values). Each runs into
    a temporary copy beside it that replaces the notebook only once it has run through, so an
    interruption or a failing cell leaves the committed notebook as it was."""
    _kernel_env()
    runs = []
    bar = tqdm(resolve_notebooks(notebooks), desc="refresh", unit="nb")  # TQDM_DISABLE=1 silences it
    for path in bar:
        start = time.perf_counter()
        tmp = temporary_name(path)

        def show(progress: CellProgress, stem: str = path.stem) -> None:
            bar.set_postfix_str(f"{stem}: {progress}")

        try:
            _execute(path, tmp, {}, log=kernel_log_path(runs_dir("refresh") / path.name), on_cell=show)
            nb = strip_run_metadata(nbformat.read(tmp, as_version=4))
            nb.metadata.pop("dart", None)  # the smoke notebooks' inputs are regenerated outputs: nbval checks them
            nbformat.write(nb, tmp)
            os.replace(tmp, path)
        except PapermillExecutionError as err:
            runs.append(NotebookRun(path.stem, time.perf_counter() - start, "failed", _failure_detail(err)))
            continue
        finally:
            tmp.unlink(missing_ok=True)
        runs.append(NotebookRun(path.stem, time.perf_counter() - start, "ok"))
    return runs


def lab_command(*, notebook_dir: Path = REPO_ROOT, port: int | None = None, token: str | None = None,
                open_browser: bool = True) -> list[str]:
    """The JupyterLab command line of ``make lab`` (the venv's ``jupyter lab`` on the suite, on
    the loopback address); the browser test starts the same one headless, on a free port, with
    a token."""
    import sys

    command = [str(Path(sys.executable).with_name("jupyter")), "lab", f"--notebook-dir={notebook_dir}",
               "--ServerApp.ip=127.0.0.1"]
    if port is not None:
        command += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers and CI run as root; JupyterLab refuses it otherwise
    return command
