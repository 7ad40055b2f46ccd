"""One derived object per Vault object: recall's caches (node catalog, name index, freshness
check) live as long as their vault and are rebuilt when its index state is replaced."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.vault import Vault

T = TypeVar("T")

__all__ = ["PerVault"]


class PerVault(Generic[T]):
    """`get(vault)`: the vault's object, made by `make(vault.state)` on first use."""

    def __init__(self, make: Callable[[IndexState], T]) -> None:
        self._make = make
        self._items: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, vault: Vault) -> T:
        with self._lock:
            item = self._items.get(vault)
            if item is None or getattr(item, "state", None) is not vault.state:
                item = self._items[vault] = self._make(vault.state)
        return item
