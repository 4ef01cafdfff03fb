"""Which extra of ``pip install 'dartlib[...]'`` brings a module the core does not install
(pyproject.toml's optional dependencies, by the names they are imported under), so that a command
that needs one names the line that installs it."""

from __future__ import annotations

# Import names per extra; tests/test_packaging.py checks them against pyproject.toml.
EXTRAS: dict[str, tuple[str, ...]] = {
    "notebooks": ("matplotlib", "seaborn", "sklearn", "tabulate", "imagecorruptions", "jupyterlab", "ipykernel",
                  "nbformat", "papermill", "nbclient", "jupyter_client", "jupyter_server", "jupyter_core"),
    "book": ("sphinx", "myst_nb", "sphinx_book_theme", "jupyter_server_mathjax"),
    "ray": ("ray",),
    "dev": ("pytest", "nbval", "playwright"),
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name is read by its top package); None for a
    module no extra brings."""
    top = (module or "").split(".")[0]
    return next((extra for extra, names in EXTRAS.items() if top in names), None)


def missing_module_message(err: ModuleNotFoundError, *, command: str) -> str | None:
    """One line for a command stopped by a module an extra installs, naming the install line; None
    where no extra brings the module (a fault of the installation, not a choice)."""
    extra = extra_for(err.name)
    if extra is None:
        return None
    return (f"`python -m dartlib {command}` needs {err.name}, which the {extra} extra installs: "
            f"pip install 'dartlib[{extra}]' (in a checkout: pip install -e '.[{extra}]', or make setup for every extra)")
