"""Summarise a CSV export of orders: revenue per month and per region,
the ten best customers, and orders whose totals do not add up."""

import argparse
import csv
import datetime as dt
from collections import Counter, defaultdict
from decimal import Decimal, InvalidOperation


class OrderError(ValueError):
    """A row that cannot be read as an order."""


def parse_row(row: dict[str, str]) -> dict:
    try:
        quantity = int(row["quantity"])
        unit_price = Decimal(row["unit_price"])
        total = Decimal(row["total"])
    except (KeyError, ValueError, InvalidOperation) as error:
        raise OrderError(f"bad row {row!r}: {error}") from error
    if quantity <= 0:
        raise OrderError(f"order {row.get('order_id')}: quantity must be positive")
    return {
        "order_id": row["order_id"],
        "customer": row["customer"].strip(),
        "region": row.get("region", "unknown").lower(),
        "date": dt.date.fromisoformat(row["date"]),
        "quantity": quantity,
        "unit_price": unit_price,
        "total": total,
    }


def summarise(rows):
    per_month = defaultdict(Decimal)
    per_region = defaultdict(Decimal)
    customers = Counter()
    mismatched = []
    for order in rows:
        month = order["date"].strftime("%Y-%m")
        per_month[month] += order["total"]
        per_region[order["region"]] += order["total"]
        customers[order["customer"]] += float(order["total"])
        expected = order["quantity"] * order["unit_price"]
        if abs(expected - order["total"]) > Decimal("0.01"):
            mismatched.append((order["order_id"], expected, order["total"]))
    return per_month, per_region, customers.most_common(10), mismatched


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", help="the CSV file")
    parser.add_argument("--strict", action="store_true", help="stop at the first bad row")
    args = parser.parse_args()

    orders, errors = [], 0
    with open(args.path, newline="", encoding="utf-8") as handle:
        for line_number, row in enumerate(csv.DictReader(handle), start=2):
            try:
                orders.append(parse_row(row))
            except OrderError as error:
                errors += 1
                print(f"line {line_number}: {error}")
                if args.strict:
                    return 1

    per_month, per_region, best, mismatched = summarise(orders)
    print("Revenue per month:")
    for month in sorted(per_month):
        print(f"  {month}  {per_month[month]:>12,.2f}")
    print("Revenue per region:")
    for region, total in sorted(per_region.items(), key=lambda item: -item[1]):
        print(f"  {region:<12} {total:>12,.2f}")
    print("Best customers:")
    for rank, (name, total) in enumerate(best, start=1):
        print(f"  {rank:2d}. {name} ({total:,.2f})")
    if mismatched:
        print(f"{len(mismatched)} orders do not add up, e.g. {mismatched[0]}")
    return 0 if errors == 0 else 2


if __name__ == "__main__":
    raise SystemExit(main())
