#!/usr/bin/env python3
"""Generates arena-20k.json: 15 bowl sections (101..115) of 25 rows, row r holding 40 + r seats
(19,875 seats), priced by distance from the stage, plus a 2,000-place standing FLOOR pool.
Format: booking-core/README.md "Venue files". Run: python3 gen_arena.py > arena-20k.json"""
import json

sections = []
for i in range(15):
    name = str(101 + i)
    centre = min(i, 14 - i)  # 0 at the ends, 7 in the middle (facing the stage)
    price = 4500 + 1000 * centre
    sections.append({"name": name, "price_cents": price, "rows": [40 + r for r in range(1, 26)]})
venue = {
    "name": "Arena 20k",
    "sections": sections,
    "pools": [{"id": "FLOOR", "price_cents": 6500, "capacity": 2000}],
}
print(json.dumps(venue, indent=1))
