"""A tiny name -> object registry whose errors list the valid names."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """An unknown name was asked of a registry; the message lists the valid ones."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0])


def unknown_name_message(kind: str, name: str, valid: Iterable[str]) -> str:
    return f"unknown {kind} {name!r}; valid names: {', '.join(valid)}"


class Registry(Mapping[str, T], Generic[T]):
    """An ordered mapping of names; ``reg[name]`` names the valid keys on a miss. Entries are only
    added (:meth:`register`), never removed or silently replaced."""

    def __init__(self, kind: str, items: Mapping[str, T] | None = None) -> None:
        self.kind = kind
        self._items: dict[str, T] = dict(items or {})

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(unknown_name_message(self.kind, name, self._items)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def register(self, name: str, item: T, *, same=None) -> T:
        """Add ``item`` under ``name`` and return it. A name already held is refused (ValueError
        naming the holder) unless ``same(held, item)`` says the two are one thing defined again
        (a notebook cell run twice), which then replaces it."""
        if not isinstance(name, str) or not name or name != name.strip():
            raise ValueError(f"a {self.kind} needs a non-empty name without surrounding spaces, got {name!r}")
        held = self._items.get(name)
        if held is not None and held is not item and not (same is not None and same(held, item)):
            raise ValueError(f"{self.kind} name {name!r} is taken by {_label(held)}; give {_label(item)} another name")
        self._items[name] = item
        return item


def _label(item: object) -> str:
    return f"{getattr(item, '__module__', '?')}.{getattr(item, '__qualname__', type(item).__name__)}"
