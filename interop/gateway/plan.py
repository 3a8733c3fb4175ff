"""plan: what scripts/gateway-interop sets up and expects, in one place (python3, no packages).

    plan.py setup WORK TOOLWIRE_URL NODE EVERYTHING_JS FILESYSTEM_JS TIME_PYTHON GIT_PYTHON
        makes WORK/files (a note with a random token), WORK/repo (a git repository with one commit
        and an untracked file), and writes WORK/gateway.json (the gateway's mcpServers file: the
        five upstreams and a "gateway" object with an audit file) and WORK/plan-2026-07-28.json
        and WORK/plan-2025-11-25.json (the plan python_client.py and ts_client.mjs follow, for a
        client that reaches either era: the tools listed and not listed, the calls and what
        their results hold, the calls whose progress is followed, the list change)
    plan.py calls PLAN [--one-per-upstream]
        prints one line per call of the plan (or only each upstream's first),
        "INDEX NAME ARGUMENTS-JSON", for the Inspector
    plan.py check-list PLAN < OUTPUT
    plan.py check-call PLAN INDEX < OUTPUT
        hold the Inspector CLI's --format json output to the plan: every wanted tool listed and
        no absent one, or the call's text and structured content as the plan says; exit 1
        saying why otherwise
    plan.py check-audit PLAN AUDIT_FILE
        every call of the plan is in the gateway's audit log (JSON lines)
    plan.py check-started LOG
        the gateway's stderr says each of the five upstreams connected with its tools
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from typing import Any

UPSTREAMS = ("everything", "filesystem", "time", "git", "toolwire")


def setup(work: str, toolwire_url: str, node: str, everything: str, filesystem: str, time_python: str, git_python: str) -> None:
    token = secrets.token_hex(6)
    files = os.path.join(work, "files")
    repo = os.path.join(work, "repo")
    os.makedirs(files, exist_ok=True)
    note = os.path.join(files, "note.txt")
    with open(note, "w", encoding="utf-8") as f:
        f.write(f"a note for the gateway, token {token}\n")
    os.makedirs(repo, exist_ok=True)
    git = ["git", "-C", repo, "-c", "user.name=gateway-interop", "-c", "user.email=interop@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    with open(os.path.join(repo, "README"), "w", encoding="utf-8") as f:
        f.write("tracked\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"first commit {token}"], check=True)
    with open(os.path.join(repo, f"untracked-{token}.txt"), "w", encoding="utf-8") as f:
        f.write("untracked\n")

    config = {
        "mcpServers": {
            "everything": {"command": node, "args": [everything, "stdio"], "prefix": "everything"},
            "filesystem": {"command": node, "args": [filesystem, files], "prefix": "fs"},
            "time": {
                "command": time_python,
                "args": ["-m", "mcp_server_time", "--local-timezone=UTC"],
                "prefix": "time",
            },
            "git": {"command": git_python, "args": ["-m", "mcp_server_git", "--repository", repo], "prefix": "git"},
            "toolwire": {"url": toolwire_url, "prefix": "toolwire"},
        },
        "gateway": {"audit": {"file": "gateway-audit.jsonl"}},
    }
    with open(os.path.join(work, "gateway.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)

    calls = [
        {"name": "everything__echo", "arguments": {"message": f"through the gateway {token}"},
         "contains": [f"Echo: through the gateway {token}"]},
        {"name": "everything__get-sum", "arguments": {"a": 2, "b": 40}, "contains": ["42"]},
        {"name": "fs__list_directory", "arguments": {"path": files}, "contains": ["[FILE] note.txt"]},
        {"name": "fs__read_text_file", "arguments": {"path": note}, "contains": [token]},
        {"name": "time__get_current_time", "arguments": {"timezone": "Europe/Paris"},
         "contains": ["Europe/Paris"], "structured": {"timezone": "Europe/Paris"}},
        {"name": "git__git_status", "arguments": {"repo_path": repo}, "contains": [f"untracked-{token}.txt"]},
        {"name": "git__git_log", "arguments": {"repo_path": repo, "max_count": 1}, "contains": [f"first commit {token}"]},
        {"name": "toolwire__add", "arguments": {"a": 2, "b": 3}, "structured": {"sum": 5}},
        {"name": "toolwire__echo", "arguments": {"message": token}, "contains": [token]},
    ]
    progress = [
        # A legacy npm server's progress over stdio, and a Toolwire server's over HTTP.
        {"name": "everything__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
         "at_least": 3, "contains": ["completed"]},
        {"name": "toolwire__count_slowly", "arguments": {"to": 3, "delay_ms": 20}, "at_least": 3,
         "contains": ["Counted to 3."]},
    ]
    tools = sorted({c["name"] for c in calls + progress} | {"fs__write_file", "git__git_diff", "time__convert_time"})
    # Served, it would fail every time: server-everything runs it only as a task, and the gateway
    # makes plain calls upstream.
    absent = ["everything__simulate-research-query"]
    for era in ("2026-07-28", "2025-11-25"):
        plan = {"era": era, "tools": tools, "absent": absent, "calls": calls, "progress": progress,
                # An upstream's list change, passed on by the gateway to its callers.
                "list_changed": {"toggle": {"name": "toolwire__toggle_shout", "arguments": {}},
                                 "tool": "toolwire__shout"}}
        with open(os.path.join(work, f"plan-{era}.json"), "w", encoding="utf-8") as f:
            json.dump(plan, f, indent=2)


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def inspector_result() -> dict[str, Any]:
    raw = sys.stdin.read()
    if not raw.strip():
        sys.exit("no result on stdout (the Inspector says why above)")
    try:
        out = json.loads(raw)
    except ValueError:
        sys.exit(f"stdout is not JSON: {raw[:2000]}")
    result = out.get("result")
    if result is None:
        sys.exit(f"no result: {out}")
    return result


def check_list(plan: dict[str, Any]) -> None:
    result = inspector_result()
    names = [t["name"] for t in result["tools"]]
    missing = [n for n in plan["tools"] if n not in names]
    if missing:
        sys.exit(f"missing tools {missing} in {names}")
    listed = [n for n in plan.get("absent", []) if n in names]
    if listed:
        sys.exit(f"tools listed that must not be: {listed}")
    prefixes = sorted({n.split("__", 1)[0] for n in names})
    print(f"{len(names)} tools from {', '.join(prefixes)}; the {len(plan['tools'])} wanted all listed")


def check_call(call: dict[str, Any]) -> None:
    result = inspector_result()
    text = "".join(b.get("text", "") for b in result.get("content", []) if b.get("type") == "text")
    if result.get("isError"):
        sys.exit(f"isError: {text[:1000]!r}")
    for want in call.get("contains", []):
        if want not in text:
            sys.exit(f"the text does not contain {want!r}: {text[:1000]!r}")
    structured = result.get("structuredContent")
    for key, want in call.get("structured", {}).items():
        if not isinstance(structured, dict) or structured.get(key) != want:
            sys.exit(f"structuredContent[{key!r}] is not {want!r}: {json.dumps(result)[:1000]}")
    shown = " ".join(text.split())
    print(repr(shown[:80] + ("..." if len(shown) > 80 else "")))


def check_audit(plan: dict[str, Any], audit: str) -> None:
    records = []
    with open(audit, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    # The gateway's own audit: each downstream call, by its served name.
    called = {json.dumps(r) for r in records}
    missing = [c["name"] for c in plan["calls"] if not any(f'"{c["name"]}"' in r for r in called)]
    if missing:
        sys.exit(f"no audit record of {missing} in {audit} ({len(records)} records)")
    print(f"{len(records)} records, every planned call among them")


def check_started(log: str) -> None:
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    counts = {}
    for name in UPSTREAMS:
        marker = f"toolwire: upstream {name}: "
        line = next((l for l in text.splitlines() if l.startswith(marker)), None)
        if line is None:
            sys.exit(f"no line {marker!r}...: the upstream did not connect at start:\n{text[-3000:]}")
        counts[name] = int(line[len(marker):].split()[0])
    if "toolwire: warning" in text:
        sys.exit(f"the gateway warned at start:\n{text[-3000:]}")
    print(", ".join(f"{name} {count}" for name, count in counts.items()) + " tools")


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    command, rest = args[0], args[1:]
    if command == "setup" and len(rest) == 7:
        setup(*rest)
    elif command == "calls" and len(rest) in (1, 2) and rest[1:] in ([], ["--one-per-upstream"]):
        seen = set()
        for index, call in enumerate(load(rest[0])["calls"]):
            upstream = call["name"].split("__", 1)[0]
            if rest[1:] and upstream in seen:
                continue
            seen.add(upstream)
            print(index, call["name"], json.dumps(call["arguments"]))
    elif command == "check-list" and len(rest) == 1:
        check_list(load(rest[0]))
    elif command == "check-call" and len(rest) == 2:
        check_call(load(rest[0])["calls"][int(rest[1])])
    elif command == "check-audit" and len(rest) == 2:
        check_audit(load(rest[0]), rest[1])
    elif command == "check-started" and len(rest) == 1:
        check_started(rest[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
