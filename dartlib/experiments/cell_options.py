"""A cell's options: the typed values a cell adds to its stream, its method or its refiner (a stream
limit, a test batch size, MEMO's BN mode, a sensitivity refiner's alpha), each declared once in
:data:`CELL_OPTIONS` with its type and meaning.

They are written as one text, the ``params`` of a cell and of the results schema
(``subset=1000,epochs=10``), which a cell's key hashes: :func:`options_text` is its only writer and
:func:`cell_options` its only reader, so a value is never written by hand or read back as a string.
The text is what the committed keys were made of, byte for byte: integers as digits, floats in
Python's ``g`` form (six significant digits: ``alpha=0.1``, ``alpha=0``), names as given, items joined by ``,``, except an option
that completes the one before it into one refiner's name (``int_batch=64;hidden=1000``), joined by
``;``. Every committed results file's ``params`` reads and writes back unchanged
(``tests/test_cell_options.py``)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Option:
    """One cell option: the type of its value, what it sets, and whether it completes the option
    written before it into one refiner's name (joined by ``;``)."""

    kind: type
    meaning: str
    joined: bool = False


CELL_OPTIONS: dict[str, Option] = {
    "limit": Option(int, "the first N images of each test stream (a reduced profile)"),
    "subset": Option(int, "the images of each class subset of a CIFAR-10C-imb stream"),
    "test_batch": Option(int, "the test batch size (the sensitivity study; else the profile's)"),
    "pool": Option(int, "the images drawn from the mixed-domain pool (0: all)"),
    "size": Option(int, "the side the images of a large benchmark are resized to"),
    "jpeg_source": Option(int, "the JPEG quality of one more round trip of the test images (the JPEG bound)"),
    "bn": Option(str, "MEMO's BN statistics: stored or adapted"),
    "views": Option(int, "MEMO's AugMix views per test image"),
    "arch": Option(str, "the source backbone (the backbone study)"),
    "dart_use": Option(str, "where NOTE applies DART's correction (NOTE's option)"),
    "alpha": Option(float, "a sensitivity refiner's alpha, the weight of L_bal (Eq. 3)"),
    "epochs": Option(int, "a sensitivity refiner's intermediate epochs"),
    "int_batch": Option(int, "a sensitivity refiner's intermediate batch size"),
    "equal_steps_batch": Option(int, "a sensitivity refiner's intermediate batch size at the default's optimiser steps"),
    "hidden": Option(int, "a sensitivity refiner's hidden width", joined=True),
}

Value = int | float | str


def _option(name: str) -> Option:
    if name not in CELL_OPTIONS:
        raise KeyError(f"unknown cell option {name!r}; valid: {', '.join(CELL_OPTIONS)} "
                       "(dartlib/experiments/cell_options.py declares them)")
    return CELL_OPTIONS[name]


def _typed(name: str, value: Value) -> Value:
    kind = _option(name).kind
    if kind is int:  # digits only: "1e3" would not write back as it was read
        text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
        if isinstance(value, bool) or not re.fullmatch(r"-?\d+", text):
            raise ValueError(f"cell option {name}={value!r}: not a whole number")
        return int(text)
    if kind is float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"cell option {name}={value!r}: not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"cell option {name}={value!r}: not a finite number")
        return number
    return str(value)


def _written(name: str, value: Value) -> str:
    return f"{value:g}" if CELL_OPTIONS[name].kind is float else str(value)


@dataclass(frozen=True, eq=False)
class CellOptions(Mapping):
    """A cell's options as typed values, in the order they are written (:attr:`text`); equal to any
    mapping of the same values, as a dict is."""

    items_: tuple[tuple[str, Value], ...] = ()

    def __hash__(self) -> int:
        return hash(frozenset(self.items_))

    def __post_init__(self) -> None:
        names = [name for name, _ in self.items_]
        if len(set(names)) != len(names):
            raise ValueError(f"cell options {self.text}: an option is given twice")

    @classmethod
    def of(cls, **values: Value | None) -> CellOptions:
        """The options ``values`` in the order given, each converted to its type; None leaves one out."""
        return cls(tuple((name, _typed(name, value)) for name, value in values.items() if value is not None))

    def __or__(self, other: CellOptions) -> CellOptions:
        """These options, then ``other``'s."""
        return CellOptions(self.items_ + other.items_)

    def __getitem__(self, name: str) -> Value:
        for key, value in self.items_:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.items_)

    def __len__(self) -> int:
        return len(self.items_)

    @property
    def text(self) -> str:
        """The options as a cell's ``params`` (module docstring)."""
        out = ""
        for i, (name, value) in enumerate(self.items_):
            if i:
                out += ";" if CELL_OPTIONS[name].joined else ","
            out += f"{name}={_written(name, value)}"
        return out


def options_text(**values: Value | None) -> str:
    """The ``params`` text of the options ``values`` (:meth:`CellOptions.of`), in the order given."""
    return CellOptions.of(**values).text


@lru_cache(maxsize=None)
def cell_options(params: str) -> CellOptions:
    """The typed options of a ``params`` text (a cell's, a results row's, a paper table's or a
    claim's); "" (or a missing value) has none. An unknown option or a value of the wrong type
    raises, naming it."""
    if not isinstance(params, str) or not params:
        return CellOptions()
    items = []
    for item in params.replace(";", ",").split(","):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"cell options {params!r}: {item!r} is not name=value")
        items.append((name, _typed(name, value)))
    return CellOptions(tuple(items))
