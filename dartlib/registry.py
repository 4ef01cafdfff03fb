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
    """An ordered, read-only mapping of names; ``reg[name]`` names the valid keys on a miss."""

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
