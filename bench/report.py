#!/usr/bin/env python3
"""Turns the raw results of bench/run into a table, ratios and target checks.

report.py RAW_DIR OUT_DIR [--smoke]: writes OUT_DIR/latest.json and OUT_DIR/latest.md and prints
the markdown. In smoke mode it only checks correctness: every scenario ran and no reply was wrong.
"""
import datetime
import json
import os
import platform
import sys


def load(raw, name):
    with open(os.path.join(raw, name)) as f:
        return json.load(f)


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "date": datetime.date.today().isoformat()}


def fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def main():
    raw, out = sys.argv[1], sys.argv[2]
    smoke = "--smoke" in sys.argv
    http = {name: load(raw, f"{name}.json") for name in ("http-echo-1", "http-echo-64", "http-realistic-64")}
    stdio = load(raw, "stdio.json")
    listing = load(raw, "list.json")
    listen = load(raw, "listen.json")
    problems = []
    rows = []
    ratios = {}
    titles = {"http-echo-1": "HTTP echo, 1 conn", "http-echo-64": "HTTP echo, 64 conns",
              "http-realistic-64": "HTTP realistic schema, 64 conns", "stdio": "stdio, 16 in flight"}
    for key, result in list(http.items()) + [("stdio", stdio)]:
        targets = result["targets"]
        for name, t in targets.items():
            if t["requests"] == 0:
                problems.append(f"{key}/{name}: no successful request")
            if t["errors"]:
                problems.append(f"{key}/{name}: {t['errors']} wrong or failed replies")
            rss = t.get("peak_rss_kb")
            rows.append((titles[key], name, t["rps"], t["p50_us"], t["p99_us"], t.get("cpu_us_per_request"),
                         rss / 1024 if rss else None, t["errors"]))
        tw = targets.get("toolwire", {}).get("rps")
        for peer in ("rmcp", "python", "ceiling"):
            if tw and targets.get(peer, {}).get("rps"):
                ratios[f"{key}: toolwire/{peer}"] = tw / targets[peer]["rps"]
    if listing["errors"]:
        problems.append(f"tools/list: {listing['errors']} failed walks")
    lines = [f"Run on {machine()['date']}: {machine()['cpu']}, {machine()['cores']} cores, Linux {machine()['kernel']}."
             + (" SMOKE MODE: correctness only, the numbers mean nothing." if smoke else ""), ""]
    lines.append("| scenario | server | req/s | p50 µs | p99 µs | CPU µs/req | peak RSS MB | errors |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {fmt(r[2])} | {fmt(r[3])} | {fmt(r[4])} | {fmt(r[5], 1)} | {fmt(r[6], 1)} | {r[7]} |")
    lines.append("")
    lines.append("| ratio (req/s, same run) | value |")
    lines.append("|---|---:|")
    for k, v in ratios.items():
        lines.append(f"| {k} | {v:.2f}× |")
    lines.append("")
    lines.append(f"tools/list of {listing['tools']:,} tools: {listing['pages']:,} pages, per page p50 "
                 f"{listing['page_p50_us']:,} µs, p99 {listing['page_p99_us']:,} µs, max {listing['page_max_us']:,} µs.")
    per_stream = listen.get("rss_bytes_per_stream")
    lines.append(f"listen: {listen['streams']:,} streams open in {listen['open_seconds']:.1f} s; one change reached all "
                 f"in {listen['fan_out_ms']:.0f} ms; server memory per idle stream "
                 f"{'–' if per_stream is None else f'{per_stream / 1024:.1f} KB'}.")
    if not smoke:
        checks = []
        e64 = http["http-echo-64"]["targets"]
        if "rmcp" in e64:
            checks.append(("HTTP echo 64: toolwire ≥ 4× rmcp", ratios.get("http-echo-64: toolwire/rmcp", 0) >= 4))
        checks.append(("HTTP echo 64: toolwire ≥ 60% of the ceiling", ratios.get("http-echo-64: toolwire/ceiling", 0) >= 0.6))
        checks.append(("HTTP echo 64: toolwire p99 ≤ 1 ms", e64["toolwire"]["p99_us"] <= 1000))
        checks.append(("stdio: toolwire ≥ 3× rmcp", ratios.get("stdio: toolwire/rmcp", 0) >= 3))
        checks.append(("tools/list: ≤ 2 ms per page (p99)", listing["page_p99_us"] <= 2000))
        checks.append(("listen: every stream notified within 1 s", listen["fan_out_ms"] <= 1000))
        checks.append(("listen: ≤ 16 KB per idle stream", per_stream is not None and per_stream <= 16 * 1024))
        lines.append("")
        lines.append("| target | met |")
        lines.append("|---|---|")
        for name, ok in checks:
            lines.append(f"| {name} | {'yes' if ok else 'no'} |")
    if problems:
        lines.append("")
        lines.append("Problems: " + "; ".join(problems))
    text = "\n".join(lines) + "\n"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "latest.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "latest.json"), "w") as f:
        json.dump({"machine": machine(), "smoke": smoke, "http": http, "stdio": stdio, "list": listing,
                   "listen": listen, "ratios": ratios, "problems": problems}, f, indent=2)
    print(text)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
