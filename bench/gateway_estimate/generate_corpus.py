#!/usr/bin/env python3
"""Writes the generated samples of corpus/ (numbers, JSON, random-looking
identifiers, CSV, indented YAML). Seeded, so the output is always the same;
the hand-written samples are committed as they are."""
import base64
import json
import os
import random
import uuid

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = random.Random(20261126)


def write(name, text):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        f.write(text)


def numbers():
    lines = []
    for i in range(60):
        a = rng.randint(0, 10**rng.randint(1, 12))
        b = round(rng.uniform(-1000, 1000), rng.randint(0, 6))
        c = rng.uniform(1e-9, 1e9)
        lines.append(f"{i}\t{a}\t{b}\t{c:.6e}\t{rng.randint(1900, 2099)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}\t+49 {rng.randint(100, 999)} {rng.randint(1000000, 9999999)}")
    return "\n".join(lines) + "\n"


def random_ids():
    parts = []
    for _ in range(20):
        parts.append(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
    for _ in range(10):
        parts.append(rng.getrandbits(256).to_bytes(32, "big").hex())
    for _ in range(6):
        parts.append(base64.b64encode(rng.getrandbits(8 * 96).to_bytes(96, "big")).decode())
    for _ in range(6):
        alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
        parts.append("sk-" + "".join(rng.choice(alphabet) for _ in range(48)))
    return "\n".join(parts) + "\n"


def long_words():
    lines = []
    for _ in range(40):
        n = rng.randint(8, 40)
        lines.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)))
    words = ["donaudampfschifffahrtsgesellschaft", "kraftfahrzeughaftpflichtversicherung",
             "antidisestablishmentarianism", "internationalization", "pneumonoultramicroscopic",
             "get_user_profile_by_email_address", "http_request_timeout_milliseconds",
             "very-long-url-slug-for-a-blog-post-about-rate-limits", "XMLHttpRequestEventTarget",
             "ThisIsAVeryLongPascalCaseIdentifierName", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "abababababababababababababababab", "zzzzzzzzzzzyyyyyyyyyyxxxxxxxxxx"]
    return "\n".join(lines + words) + "\n"


def tool_request():
    return {
        "model": "gpt-4o-mini",
        "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant for a travel agency. Answer briefly and call tools when you need live data."},
            {"role": "user", "content": "Is there a direct flight from Vienna to Lisbon next Friday, and what will the weather be like?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_8dK2mQ", "type": "function", "function": {"name": "search_flights", "arguments": json.dumps({"from": "VIE", "to": "LIS", "date": "2026-03-20", "direct_only": True})}},
                {"id": "call_4Zr7pX", "type": "function", "function": {"name": "get_forecast", "arguments": json.dumps({"city": "Lisbon", "date": "2026-03-20"})}}]},
            {"role": "tool", "tool_call_id": "call_8dK2mQ", "content": json.dumps({"flights": [{"number": "TP1269", "departs": "13:05", "arrives": "15:40", "price_eur": 189}, {"number": "OS363", "departs": "07:20", "arrives": "09:55", "price_eur": 214}]})},
            {"role": "tool", "tool_call_id": "call_4Zr7pX", "content": json.dumps({"high_c": 19, "low_c": 12, "rain_probability": 0.35})},
        ],
        "tools": [
            {"type": "function", "function": {"name": "search_flights", "description": "Find flights between two airports on a date.",
                                              "parameters": {"type": "object", "properties": {
                                                  "from": {"type": "string", "description": "IATA code of the departure airport"},
                                                  "to": {"type": "string", "description": "IATA code of the arrival airport"},
                                                  "date": {"type": "string", "format": "date"},
                                                  "direct_only": {"type": "boolean", "default": False}},
                                                  "required": ["from", "to", "date"]}}},
            {"type": "function", "function": {"name": "get_forecast", "description": "Weather forecast for a city on a date.",
                                              "parameters": {"type": "object", "properties": {
                                                  "city": {"type": "string"}, "date": {"type": "string", "format": "date"}},
                                                  "required": ["city", "date"]}}},
        ],
    }


def inventory():
    items = []
    for i in range(40):
        items.append({
            "sku": f"SKU-{rng.randint(10000, 99999)}",
            "name": rng.choice(["desk lamp", "office chair", "monitor arm", "usb-c hub", "keyboard", "notebook", "water bottle"]),
            "price": {"amount": rng.randint(199, 49999), "currency": "EUR"},
            "stock": rng.randint(0, 500),
            "tags": rng.sample(["new", "sale", "eco", "bestseller", "limited", "refurbished"], rng.randint(0, 3)),
            "active": rng.random() < 0.8,
            "updated_at": f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:{rng.randint(10, 59)}:00Z",
        })
    return {"items": items, "next_cursor": None, "total": len(items)}


def csv_table():
    rows = ["order_id,date,customer,region,quantity,unit_price,total"]
    for i in range(80):
        q = rng.randint(1, 20)
        p = rng.randint(100, 20000) / 100
        rows.append(f"{100000 + i},2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},"
                    f"{rng.choice(['Acme GmbH', 'Nordlicht AG', 'Blue Fin Ltd', 'Casa Verde SL', 'Kowalski & Syn'])},"
                    f"{rng.choice(['eu-west', 'eu-central', 'us-east', 'ap-south'])},{q},{p:.2f},{q * p:.2f}")
    return "\n".join(rows) + "\n"


def yaml_doc():
    lines = ["services:"]
    for name in ["api", "worker", "scheduler", "cache", "database"]:
        lines += [f"  {name}:", f"    image: registry.example.com/shop/{name}:1.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
                  "    restart: unless-stopped", "    environment:",
                  f"      LOG_LEVEL: {rng.choice(['info', 'debug', 'warn'])}",
                  f"      MAX_CONNECTIONS: \"{rng.randint(10, 500)}\"",
                  "    deploy:", "      resources:", "        limits:",
                  f"          cpus: \"{rng.choice(['0.5', '1.0', '2.0'])}\"",
                  f"          memory: {rng.choice(['256M', '512M', '1G', '4G'])}",
                  "    healthcheck:", f"      test: [\"CMD\", \"curl\", \"-f\", \"http://localhost:{rng.randint(3000, 9000)}/healthz\"]",
                  "      interval: 30s", "      timeout: 5s", "      retries: 3"]
    return "\n".join(lines) + "\n"


write("numbers.tsv", numbers())
write("random_ids.txt", random_ids())
write("json_tools_pretty.json", json.dumps(tool_request(), indent=2, ensure_ascii=False) + "\n")
write("json_tools_compact.json", json.dumps(tool_request(), separators=(",", ":")) + "\n")
write("json_inventory.json", json.dumps(inventory(), indent=2) + "\n")
write("orders.csv", csv_table())
write("compose.yaml", yaml_doc())
write("long_words.txt", long_words())
