#!/usr/bin/env python3
"""Summarizes an MCP conformance suite results folder, strictly.

usage: conformance-summary.py server|client OUTDIR [SCENARIO...]

The suite writes OUTDIR/server-NAME-TIMESTAMP/checks.json in server mode and
OUTDIR/NAME-TIMESTAMP/checks.json in client mode (NAME may contain "/", e.g. auth/...).
For each SCENARIO (default: every checks.json found under OUTDIR) this prints its counts of
SUCCESS, FAILURE and WARNING rows, and the id and errorMessage of each FAILURE or WARNING row.

A scenario fails when it has any FAILURE or WARNING row, when it produced no checks.json, or when
OUTDIR/suite-status.tsv (written by scripts/conformance: NAME<TAB>EXIT<TAB>LOG a line, NAME "*"
for a whole-run invocation) says the suite exited non-zero for it. If a folder holds several runs
of one scenario, the newest is used. The last line is "conformance: N passed, M failed" (scenarios);
the exit status is 1 if any scenario failed or none was found, else 0.
Python 3 standard library only.
"""
import glob
import json
import os
import re
import sys

TIMESTAMP = re.compile(r"-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:-\d+)?Z)$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_MESSAGE = 2000
LOG_HEAD = 5
LOG_TAIL = 10


def prefix_for(mode):
    return "server-" if mode == "server" else ""


def find_runs(root, mode):
    """Maps scenario name -> list of (timestamp, checks.json path), newest last."""
    prefix = prefix_for(mode)
    runs = {}
    for path in glob.glob(os.path.join(root, "**", "checks.json"), recursive=True):
        rel = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "/")
        m = TIMESTAMP.search(rel)
        if not m or not rel.startswith(prefix):
            continue
        name = rel[len(prefix):m.start()]
        if mode == "client" and name.startswith("server-"):
            continue  # a server run's folder in a shared results folder
        if name:
            runs.setdefault(name, []).append((m.group(1), path))
    for entries in runs.values():
        entries.sort()
    return runs


def read_status(root):
    """Reads suite-status.tsv: name -> (exit code, log path)."""
    status = {}
    try:
        with open(os.path.join(root, "suite-status.tsv"), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2 and parts[1].lstrip("-").isdigit():
                    status[parts[0]] = (int(parts[1]), parts[2] if len(parts) > 2 else "")
    except OSError:
        pass
    return status


def indent(text, prefix):
    return ("\n" + prefix).join(text.splitlines() or [""])


def print_log_tail(log):
    if not log:
        return
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    print(f"       from {log}:")
    if len(lines) > LOG_HEAD + LOG_TAIL:
        lines = lines[:LOG_HEAD] + ["..."] + lines[-LOG_TAIL:]
    for line in lines:
        print("       | " + ANSI.sub("", line))


def load_checks(path):
    with open(path, encoding="utf-8") as f:
        checks = json.load(f)
    if not isinstance(checks, list):
        raise ValueError("not a JSON array")
    return [c for c in checks if isinstance(c, dict)]


def judge(name, runs, status):
    """Prints one scenario's report; returns True when it passed."""
    rc, log = status.get(name, (0, ""))
    entries = runs.get(name, [])
    if not entries:
        note = f"; suite exit status {rc}" if name in status else ""
        print(f"  FAIL {name}: no checks.json{note}")
        print_log_tail(log)
        return False
    path = entries[-1][1]
    try:
        checks = load_checks(path)
    except (OSError, ValueError) as e:
        print(f"  FAIL {name}: unreadable {path}: {e}")
        print_log_tail(log)
        return False
    counts = {s: sum(1 for c in checks if c.get("status") == s)
              for s in ("SUCCESS", "FAILURE", "WARNING")}
    bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    ok = not bad and rc == 0
    skipped = sum(1 for c in checks if c.get("status") == "SKIPPED")
    extra = f", {skipped} SKIPPED" if skipped else ""
    extra += f", newest of {len(entries)} runs" if len(entries) > 1 else ""
    print(f"  {'ok  ' if ok else 'FAIL'} {name} ({counts['SUCCESS']} SUCCESS, "
          f"{counts['FAILURE']} FAILURE, {counts['WARNING']} WARNING{extra})")
    for c in bad:
        msg = str(c.get("errorMessage") or c.get("description") or "").strip()
        if len(msg) > MAX_MESSAGE:
            msg = msg[:MAX_MESSAGE] + f" ... (truncated; see {path})"
        print(f"       {c.get('status')} {c.get('id')}: {indent(msg, '         ')}")
    if rc != 0:
        print(f"       suite exited with status {rc}")
        if not bad:
            print_log_tail(log)
    return ok


def main(argv):
    if len(argv) < 3 or argv[1] not in ("server", "client"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    mode, root, wanted = argv[1], argv[2], argv[3:]
    if not os.path.isdir(root):
        print(f"conformance-summary: no such folder: {root}", file=sys.stderr)
        return 2
    runs = find_runs(root, mode)
    status = read_status(root)
    names = wanted or sorted(runs)
    passed = failed = 0
    for name in names:
        if judge(name, runs, status):
            passed += 1
        else:
            failed += 1
    whole_run_ok = True
    if "*" in status and status["*"][0] != 0:
        whole_run_ok = False
        print(f"  suite run exited with status {status['*'][0]} (log: {status['*'][1]})")
        if not failed:
            print_log_tail(status["*"][1])
    if not names:
        print(f"  no {mode} checks.json found under {root}")
    print(f"conformance: {passed} passed, {failed} failed")
    return 0 if names and not failed and whole_run_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
