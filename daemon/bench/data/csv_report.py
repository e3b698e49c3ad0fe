"""Aggregate sales rows from a CSV file and print a summary table."""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, TextIO

REQUIRED_COLUMNS = ("region", "product", "quantity", "price")


@dataclass
class SaleRow:
    region: str
    product: str
    quantity: int
    price: float

    @property
    def revenue(self) -> float:
        return self.quantity * self.price


@dataclass
class Summary:
    key: str
    count: int = 0
    units: int = 0
    revenue: float = 0.0
    products: set = field(default_factory=set)

    def add(self, row: SaleRow) -> None:
        self.count += 1
        self.units += row.quantity
        self.revenue += row.revenue
        self.products.add(row.product)

    @property
    def average_price(self) -> float:
        return self.revenue / self.units if self.units else 0.0


class ReportError(Exception):
    pass


def read_rows(stream: TextIO) -> Iterator[SaleRow]:
    """Yield parsed rows, raising ReportError with the line number on bad data."""
    reader = csv.DictReader(stream)
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ReportError(f"missing columns: {', '.join(missing)}")
    for line_no, raw in enumerate(reader, start=2):
        try:
            yield SaleRow(
                region=raw["region"].strip() or "unknown",
                product=raw["product"].strip(),
                quantity=int(raw["quantity"]),
                price=float(raw["price"]),
            )
        except (TypeError, ValueError) as exc:
            raise ReportError(f"line {line_no}: {exc}") from exc


def aggregate(rows: Iterator[SaleRow], group_by: str) -> List[Summary]:
    if group_by not in ("region", "product"):
        raise ValueError(f"cannot group by {group_by!r}")
    groups: Dict[str, Summary] = defaultdict(lambda: Summary(key=""))
    for row in rows:
        key = getattr(row, group_by)
        summary = groups[key]
        summary.key = key
        summary.add(row)
    return sorted(groups.values(), key=lambda s: s.revenue, reverse=True)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Format rows as a fixed-width text table with right-aligned numbers."""
    cells = [[str(h) for h in headers]]
    for row in rows:
        cells.append([
            f"{value:,.2f}" if isinstance(value, float) else str(value)
            for value in row
        ])
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def render(row: List[str]) -> str:
        parts = []
        for i, value in enumerate(row):
            if i == 0:
                parts.append(value.ljust(widths[i]))
            else:
                parts.append(value.rjust(widths[i]))
        return " | ".join(parts)

    separator = "-+-".join("-" * w for w in widths)
    output = [render(cells[0]), separator]
    output.extend(render(r) for r in cells[1:])
    return "\n".join(output)


def build_report(summaries: List[Summary], group_by: str) -> str:
    headers = [group_by.title(), "Rows", "Units", "Revenue", "Avg price"]
    body = [
        [s.key, s.count, s.units, s.revenue, s.average_price]
        for s in summaries
    ]
    total_units = sum(s.units for s in summaries)
    total_revenue = sum(s.revenue for s in summaries)
    body.append(["TOTAL", sum(s.count for s in summaries), total_units,
                 total_revenue, total_revenue / total_units if total_units else 0.0])
    return format_table(headers, body)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path, help="CSV file to read ('-' for stdin)")
    parser.add_argument(
        "--group-by",
        choices=("region", "product"),
        default="region",
        help="column used to group rows",
    )
    parser.add_argument("--top", type=int, default=0, help="only show the top N groups")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    try:
        if str(args.path) == "-":
            summaries = aggregate(read_rows(sys.stdin), args.group_by)
        else:
            with args.path.open(newline="", encoding="utf-8") as fh:
                summaries = aggregate(read_rows(fh), args.group_by)
    except (OSError, ReportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.top > 0:
        summaries = summaries[: args.top]
    print(build_report(summaries, args.group_by))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
