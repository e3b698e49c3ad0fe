"""Simple warehouse inventory model with stock movements and reporting."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Dict, Iterable, List, Optional

logger = logging.getLogger(__name__)


class InventoryError(Exception):
    """Base error for inventory operations."""


class InsufficientStock(InventoryError):
    def __init__(self, sku: str, requested: int, available: int) -> None:
        super().__init__(
            f"cannot remove {requested} of {sku}: only {available} available"
        )
        self.sku = sku
        self.requested = requested
        self.available = available


class MovementKind(str, Enum):
    RECEIVE = "receive"
    SHIP = "ship"
    ADJUST = "adjust"


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    unit_price: Decimal
    reorder_level: int = 0

    def __post_init__(self) -> None:
        if not self.sku or not self.sku.isalnum():
            raise ValueError(f"invalid sku: {self.sku!r}")
        if self.unit_price < 0:
            raise ValueError("unit_price must be non-negative")
        if self.reorder_level < 0:
            raise ValueError("reorder_level must be non-negative")


@dataclass
class Movement:
    sku: str
    kind: MovementKind
    quantity: int
    timestamp: datetime = field(default_factory=datetime.utcnow)
    note: str = ""


@dataclass
class StockItem:
    product: Product
    quantity: int = 0

    @property
    def value(self) -> Decimal:
        return self.product.unit_price * self.quantity

    @property
    def needs_reorder(self) -> bool:
        return self.quantity <= self.product.reorder_level


class Warehouse:
    """Tracks stock levels for a set of products in a single location."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._items: Dict[str, StockItem] = {}
        self._history: List[Movement] = []

    def register(self, product: Product) -> StockItem:
        if product.sku in self._items:
            raise InventoryError(f"product {product.sku} already registered")
        item = StockItem(product)
        self._items[product.sku] = item
        logger.debug("registered %s in %s", product.sku, self.name)
        return item

    def get(self, sku: str) -> StockItem:
        try:
            return self._items[sku]
        except KeyError:
            raise InventoryError(f"unknown sku: {sku}") from None

    def receive(self, sku: str, quantity: int, note: str = "") -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        item = self.get(sku)
        item.quantity += quantity
        self._record(sku, MovementKind.RECEIVE, quantity, note)

    def ship(self, sku: str, quantity: int, note: str = "") -> None:
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        item = self.get(sku)
        if item.quantity < quantity:
            raise InsufficientStock(sku, quantity, item.quantity)
        item.quantity -= quantity
        self._record(sku, MovementKind.SHIP, -quantity, note)

    def adjust(self, sku: str, new_quantity: int, note: str = "") -> None:
        if new_quantity < 0:
            raise ValueError("new_quantity must be non-negative")
        item = self.get(sku)
        delta = new_quantity - item.quantity
        item.quantity = new_quantity
        if delta:
            self._record(sku, MovementKind.ADJUST, delta, note)

    def _record(self, sku: str, kind: MovementKind, delta: int, note: str) -> None:
        movement = Movement(sku=sku, kind=kind, quantity=delta, note=note)
        self._history.append(movement)
        logger.info("%s %s %+d (%s)", self.name, sku, delta, kind.value)

    def history(self, sku: Optional[str] = None) -> List[Movement]:
        if sku is None:
            return list(self._history)
        return [m for m in self._history if m.sku == sku]

    def items(self) -> Iterable[StockItem]:
        return sorted(self._items.values(), key=lambda i: i.product.sku)

    def total_value(self) -> Decimal:
        return sum((item.value for item in self._items.values()), Decimal("0"))

    def low_stock(self) -> List[StockItem]:
        return [item for item in self.items() if item.needs_reorder]


def format_report(warehouse: Warehouse) -> str:
    """Render a plain-text stock report for the given warehouse."""
    lines = [f"Inventory report: {warehouse.name}", ""]
    header = f"{'SKU':<10} {'Name':<24} {'Qty':>6} {'Value':>12}"
    lines.append(header)
    lines.append("-" * len(header))
    for item in warehouse.items():
        flag = " *" if item.needs_reorder else ""
        lines.append(
            f"{item.product.sku:<10} {item.product.name[:24]:<24} "
            f"{item.quantity:>6} {item.value:>12.2f}{flag}"
        )
    lines.append("-" * len(header))
    lines.append(f"{'Total':<42} {warehouse.total_value():>12.2f}")
    low = warehouse.low_stock()
    if low:
        lines.append("")
        lines.append("Items at or below reorder level: " + ", ".join(
            item.product.sku for item in low
        ))
    return "\n".join(lines)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    wh = Warehouse("Main")
    wh.register(Product("A100", "Steel bolts", Decimal("0.25"), reorder_level=50))
    wh.register(Product("B200", "Hex nuts", Decimal("0.10"), reorder_level=100))
    wh.receive("A100", 200, "initial stock")
    wh.receive("B200", 80)
    wh.ship("A100", 170, "order 1042")
    print(format_report(wh))
