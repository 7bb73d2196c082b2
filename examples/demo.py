"""Summary statistics for a small inventory: the file `scripts/demo.sh` completes in.

The demo puts the cursor at the end of the bare ``return`` in ``median`` and asks Seam for
the rest of the statement.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int

    @property
    def value(self) -> float:
        return self.price * self.quantity


def load_items(lines: list[str]) -> list[Item]:
    """Parse ``name,price,quantity`` lines, skipping blanks and comments."""
    items = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, price, quantity = line.split(",")
        items.append(Item(name.strip(), float(price), int(quantity)))
    return items


def median(values: list[float]) -> float:
    """The middle value (the mean of the two middle values for an even count)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return


def summary(items: list[Item]) -> dict[str, float]:
    prices = [item.price for item in items]
    return {
        "items": len(items),
        "total_value": sum(item.value for item in items),
        "median_price": median(prices),
    }


if __name__ == "__main__":
    stock = load_items(["apple, 0.5, 10", "pear, 0.75, 4", "# sold out", "fig, 2.0, 3"])
    print(summary(stock))
