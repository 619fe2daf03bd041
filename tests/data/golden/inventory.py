"""A small inventory service: items, stock levels and reorder rules."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from decimal import Decimal

log = logging.getLogger(__name__)

DEFAULT_REORDER_LEVEL = 10


@dataclass
class Item:
    """One stock-keeping unit."""

    sku: str
    name: str
    price: Decimal
    tags: list[str] = field(default_factory=list)

    def label(self) -> str:
        return f"{self.sku} {self.name} ({self.price:.2f})"


class Inventory:
    """Stock levels per SKU, with a reorder rule."""

    def __init__(self, reorder_level: int = DEFAULT_REORDER_LEVEL) -> None:
        self.reorder_level = reorder_level
        self._items: dict[str, Item] = {}
        self._stock: dict[str, int] = {}

    def add(self, item: Item, quantity: int = 0) -> None:
        if item.sku in self._items:
            raise ValueError(f"duplicate SKU {item.sku}")
        self._items[item.sku] = item
        self._stock[item.sku] = quantity
        log.info("added %s with %d in stock", item.sku, quantity)

    def take(self, sku: str, quantity: int) -> int:
        """Remove ``quantity`` units; returns what is left."""
        left = self._stock[sku] - quantity
        if left < 0:
            raise ValueError(f"only {self._stock[sku]} of {sku} in stock")
        self._stock[sku] = left
        return left

    def to_reorder(self) -> list[Item]:
        return [
            self._items[sku]
            for sku, count in sorted(self._stock.items())
            if count < self.reorder_level
        ]

    def value(self) -> Decimal:
        total = Decimal(0)
        for sku, count in self._stock.items():
            total += self._items[sku].price * count
        return total


def größte_position(inventory: Inventory) -> Item | None:
    """The item with the largest stock value (a non-ASCII name on purpose)."""
    best, best_value = None, Decimal(-1)
    for sku, count in inventory._stock.items():
        value = inventory._items[sku].price * count
        if value > best_value:
            best, best_value = inventory._items[sku], value
    return best
