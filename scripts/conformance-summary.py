#!/usr/bin/env python3
"""Summarizes an MCP conformance suite results folder, strictly, against committed expectations.

usage: conformance-summary.py server|client OUTDIR [--expected FILE] [--suite-list FILE]
                                [SCENARIO...]
       conformance-summary.py --run-list FILE
       conformance-summary.py --self-test

The suite writes OUTDIR/server-NAME-TIMESTAMP/checks.json in server mode and
OUTDIR/NAME-TIMESTAMP/checks.json in client mode (NAME may contain "/", e.g. auth/...).
OUTDIR/suite-status.tsv (written by scripts/conformance: NAME<TAB>EXIT<TAB>LOG a line, NAME "*"
for a whole-run invocation) gives the suite's exit status. If a folder holds several runs of one
scenario, the newest is used. Each scenario gets one outcome:

  passed   every check SUCCESS (no FAILURE, no WARNING), at least one of them other than the
           runner's own wire-schema-valid, and the suite exited 0
  skipped  no FAILURE or WARNING, but no check other than wire-schema-valid succeeded (all were
           SKIPPED or INFO, or there were none): nothing was verified
  failed   a FAILURE or WARNING row, an unreadable checks.json, or a non-zero suite exit
  missing  no checks.json

With --expected FILE (one `pass NAME`, `skip NAME REASON` or `not-run NAME REASON` a line; see
scripts/conformance-expected/), every outcome must match its line, every scenario that ran and
every one named by --suite-list (the suite's own list, one a line) must have a line, and every
line must name a scenario of that list. Each difference is printed as a problem; the last line is
"SIDE: N passed (P expected), ..." and the exit status is 1 if there was any problem.
Without --expected, each SCENARIO (default: every checks.json found) must pass; the last line is
"conformance: N passed, M failed, K all-skipped" and the exit status is 1 unless all passed.

--run-list FILE prints the scenarios FILE expects to run (its pass and skip lines), one a line.
--self-test runs the comparison against synthetic results folders and exits 1 if any case is
not caught. Python 3 standard library only.
"""
import contextlib
import glob
import io
import json
import os
import re
import sys
import tempfile

TIMESTAMP = re.compile(r"-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:-\d+)?Z)$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_MESSAGE = 2000
LOG_HEAD = 5
LOG_TAIL = 10
# The runner appends this check to every scenario whose traffic it saw; a SUCCESS of it alone
# only says the harness validated messages, not that the scenario tested anything.
RUNNER_CHECK = "wire-schema-valid"
KINDS = ("pass", "skip", "not-run")
# The outcome each kind of expectation line asks for.
WANTED = {"pass": "passed", "skip": "skipped", "not-run": "missing"}


class ExpectationError(Exception):
    """A malformed expectations file; the message names the file and line."""


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


def parse_expected(text, source):
    """Parses an expectations file: name -> (kind, reason, line number), in file order."""
    expected = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split(None, 2)
        where = f"{source}:{number}"
        if words[0] not in KINDS:
            raise ExpectationError(
                f"{where}: unknown kind {words[0]!r} (want one of {', '.join(KINDS)})")
        if len(words) < 2:
            raise ExpectationError(f"{where}: {words[0]} needs a scenario name")
        kind, name, reason = words[0], words[1], (words[2].strip() if len(words) > 2 else "")
        if kind == "pass" and reason:
            raise ExpectationError(f"{where}: a pass line takes no reason (got {reason!r})")
        if kind != "pass" and not reason:
            raise ExpectationError(f"{where}: {kind} {name} needs a reason on the same line")
        if name in expected:
            raise ExpectationError(f"{where}: {name} is already listed on line {expected[name][2]}")
        expected[name] = (kind, reason, number)
    return expected


def read_expected(path):
    try:
        with open(path, encoding="utf-8") as f:
            return parse_expected(f.read(), path)
    except OSError as e:
        raise ExpectationError(f"{path}: {e.strerror}") from e


def read_suite_list(path):
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def classify(checks, rc):
    """The outcome of one scenario's checks.json rows and the suite's exit status for it."""
    if rc != 0 or any(c.get("status") in ("FAILURE", "WARNING") for c in checks):
        return "failed"
    if any(c.get("status") == "SUCCESS" and c.get("id") != RUNNER_CHECK for c in checks):
        return "passed"
    return "skipped"


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


def print_bad_rows(bad, path):
    for c in bad:
        msg = str(c.get("errorMessage") or c.get("description") or "").strip()
        if len(msg) > MAX_MESSAGE:
            msg = msg[:MAX_MESSAGE] + f" ... (truncated; see {path})"
        print(f"       {c.get('status')} {c.get('id')}: {indent(msg, '         ')}")


def judge(name, runs, status):
    """Prints one scenario's report; returns its outcome (see classify, plus "missing")."""
    rc, log = status.get(name, (0, ""))
    entries = runs.get(name, [])
    if not entries:
        note = f"; suite exit status {rc}" if name in status else ""
        print(f"  MISS {name}: no checks.json{note}")
        print_log_tail(log)
        return "missing"
    path = entries[-1][1]
    try:
        checks = load_checks(path)
    except (OSError, ValueError) as e:
        print(f"  FAIL {name}: unreadable {path}: {e}")
        print_log_tail(log)
        return "failed"
    outcome = classify(checks, rc)
    counts = {s: sum(1 for c in checks if c.get("status") == s)
              for s in ("SUCCESS", "FAILURE", "WARNING", "SKIPPED")}
    extra = f", {counts['SKIPPED']} SKIPPED" if counts["SKIPPED"] else ""
    extra += f", newest of {len(entries)} runs" if len(entries) > 1 else ""
    label = {"passed": "ok  ", "skipped": "SKIP", "failed": "FAIL"}[outcome]
    print(f"  {label} {name} ({counts['SUCCESS']} SUCCESS, {counts['FAILURE']} FAILURE, "
          f"{counts['WARNING']} WARNING{extra})")
    print_bad_rows([c for c in checks if c.get("status") in ("FAILURE", "WARNING")], path)
    if outcome == "skipped":
        skipped = [c for c in checks if c.get("status") == "SKIPPED"]
        if skipped:
            print("       no check passed; the suite SKIPPED:")
            print_bad_rows(skipped, path)
        else:
            print("       no check passed; the scenario recorded no check of its own")
    if rc != 0:
        print(f"       suite exited with status {rc}")
        if not counts["FAILURE"] + counts["WARNING"]:
            print_log_tail(log)
    return outcome


# What to print when an expected outcome (the kind of its line) differs from the actual one.
# "-" marks something that stopped working, "+" something that works better than the file says.
MISMATCH = {
    ("pass", "failed"): "- {name}: expected to pass ({where}), FAILED",
    ("pass", "skipped"): "- {name}: expected to pass ({where}), but no check passed (all SKIPPED): "
                         "nothing was verified",
    ("pass", "missing"): "- {name}: expected to pass ({where}), but did not run (no checks.json)",
    ("skip", "passed"): "+ {name}: now passes, but {where} lists it as skip ({reason}); "
                        "change that line to `pass {name}`",
    ("skip", "failed"): "- {name}: expected all-skipped ({where}: {reason}), FAILED",
    ("skip", "missing"): "- {name}: expected all-skipped ({where}), but did not run "
                         "(no checks.json)",
    ("not-run", "passed"): "+ {name}: ran and passed, but {where} lists it as not-run ({reason}); "
                           "change that line to `pass {name}`",
    ("not-run", "skipped"): "+ {name}: ran with no check passed, but {where} lists it as not-run; "
                            "make that line `skip {name} REASON`, or do not run it",
    ("not-run", "failed"): "- {name}: ran and FAILED, but {where} lists it as not-run ({reason})",
}
# What to print for a scenario that ran (or was asked for) without a line in the file.
UNLISTED = {
    "passed": "+ {name}: passes, but is not in {source}; add `pass {name}`",
    "skipped": "- {name}: no check passed (all SKIPPED), and {source} does not expect that; add "
               "`skip {name} REASON` if the suite skips it on purpose, or make it run",
    "failed": "- {name}: FAILED, and is not in {source}",
    "missing": "- {name}: did not run (no checks.json), and is not in {source}",
}


def compare(expected, outcomes, suite_list, source):
    """Lists every difference between the expectations and the outcomes, one line each.

    `outcomes` maps each scenario judged (it ran, or was expected to) to its outcome; a scenario
    absent from it did not run. `suite_list` is the suite's own list for this side, or None.
    """
    problems = []
    for name, (kind, reason, number) in expected.items():
        got = outcomes.get(name, "missing")
        if got != WANTED[kind]:
            problems.append(MISMATCH[(kind, got)].format(
                name=name, where=f"{source}:{number}", reason=reason))
    for name, got in outcomes.items():
        if name not in expected:
            problems.append(UNLISTED[got].format(name=name, source=source))
    if suite_list is not None:
        known = set(suite_list)
        for name in suite_list:
            if name not in expected and name not in outcomes:
                problems.append(f"- {name}: in the suite's list, but not in {source}; "
                                "add a pass, skip or not-run line for it")
        for name, (_, _, number) in expected.items():
            if name not in known:
                problems.append(f"- {name}: {source}:{number} names a scenario the suite's list "
                                "does not have; remove the stale line")
    passed = sum(1 for got in outcomes.values() if got == "passed")
    wanted = sum(1 for kind, _, _ in expected.values() if kind == "pass")
    if passed != wanted:
        problems.append(f"! {passed} scenario{'s' if passed != 1 else ''} passed, "
                        f"{source} lists {wanted} as pass")
    return problems


def summary_line(side, expected, outcomes, problems):
    """The last line of a checked run: the counts, each next to what the file expects."""
    def got(outcome):
        return sum(1 for o in outcomes.values() if o == outcome)

    def want(kind):
        return sum(1 for k, _, _ in expected.values() if k == kind)

    parts = [f"{got('passed')} passed ({want('pass')} expected)",
             f"{got('skipped')} all-skipped ({want('skip')} expected)",
             f"{got('failed')} failed"]
    if got("missing"):
        parts.append(f"{got('missing')} did not run")
    not_run = sum(1 for name, (k, _, _) in expected.items()
                  if k == "not-run" and name not in outcomes)
    if not_run:
        parts.append(f"{not_run} not run, as listed")
    plural = "s" if len(problems) != 1 else ""
    verdict = f"{len(problems)} problem{plural}: FAILED" if problems else "ok"
    return f"{side}: {', '.join(parts)} — {verdict}"


def check_expected(mode, runs, status, wanted, expected_path, suite_list_path):
    """Judges every scenario against the expectations file; returns the exit status."""
    try:
        expected = read_expected(expected_path)
        suite_list = read_suite_list(suite_list_path) if suite_list_path else None
    except (ExpectationError, OSError) as e:
        print(f"conformance-summary: {e}", file=sys.stderr)
        return 2
    names = list(dict.fromkeys(
        [n for n, (kind, _, _) in expected.items() if kind != "not-run"] + wanted + sorted(runs)))
    outcomes = {name: judge(name, runs, status) for name in names}
    # Named as the reader would type it: relative when under the current folder.
    source = os.path.relpath(expected_path)
    if source.startswith(".."):
        source = expected_path
    problems = compare(expected, outcomes, suite_list, source)
    if "*" in status and status["*"][0] != 0:
        rc, log = status["*"]
        problems.append(f"- the suite's run exited with status {rc} (log: {log})")
        print_log_tail(status["*"][1])
    if problems:
        print(f"conformance: the outcomes differ from {source}:")
        for line in problems:
            print(f"  {line}")
    print(summary_line(mode, expected, outcomes, problems))
    return 1 if problems else 0


def check_strict(mode, root, runs, status, wanted):
    """Without expectations: every scenario must pass; returns the exit status."""
    names = wanted or sorted(runs)
    outcomes = [judge(name, runs, status) for name in names]
    passed = outcomes.count("passed")
    skipped = outcomes.count("skipped")
    failed = len(outcomes) - passed - skipped
    whole_run_ok = True
    if "*" in status and status["*"][0] != 0:
        whole_run_ok = False
        print(f"  suite run exited with status {status['*'][0]} (log: {status['*'][1]})")
        if not failed:
            print_log_tail(status["*"][1])
    if not names:
        print(f"  no {mode} checks.json found under {root}")
    print(f"conformance: {passed} passed, {failed} failed, {skipped} all-skipped")
    return 0 if names and passed == len(names) and whole_run_ok else 1


def parse_args(argv):
    """Splits `server|client OUTDIR [--expected F] [--suite-list F] [SCENARIO...]`, or None."""
    if len(argv) < 3 or argv[1] not in ("server", "client"):
        return None
    options, rest, args = {}, [], argv[3:]
    while args:
        arg = args.pop(0)
        if arg in ("--expected", "--suite-list"):
            if not args:
                return None
            options[arg] = args.pop(0)
        else:
            rest.append(arg)
    return argv[1], argv[2], options, rest


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) == 3 and argv[1] == "--run-list":
        try:
            expected = read_expected(argv[2])
        except ExpectationError as e:
            print(f"conformance-summary: {e}", file=sys.stderr)
            return 2
        for name, (kind, _, _) in expected.items():
            if kind != "not-run":
                print(name)
        return 0
    parsed = parse_args(argv)
    if parsed is None:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    mode, root, options, wanted = parsed
    if not os.path.isdir(root):
        print(f"conformance-summary: no such folder: {root}", file=sys.stderr)
        return 2
    runs = find_runs(root, mode)
    status = read_status(root)
    if "--expected" in options:
        return check_expected(mode, runs, status, wanted,
                              options["--expected"], options.get("--suite-list"))
    return check_strict(mode, root, runs, status, wanted)


# ---- Self-test: synthetic results folders, each with one thing wrong that must be caught. ----

OK = [("check-a", "SUCCESS"), (RUNNER_CHECK, "SUCCESS")]
ALL_SKIPPED = [("check-s", "SKIPPED")]
RUNNER_ONLY = [(RUNNER_CHECK, "SUCCESS"), ("check-s", "SKIPPED")]
FAILING = [("check-a", "SUCCESS"), ("check-f", "FAILURE")]
WARNING = [("check-a", "SUCCESS"), ("check-w", "WARNING")]
BASE = "pass alpha\npass beta\nnot-run delta needs a feature we lack\n"
WITH_SKIP = BASE + "skip gamma the suite skips every check on purpose\n"
SUITE = ["alpha", "beta", "delta"]

# (title, mode, expectations text or None for the strict mode, suite list, runs, suite-status
#  rows, wanted exit status, lines the output must contain)
SELF_TEST_CASES = [
    ("all pass", "server", BASE, SUITE, {"alpha": OK, "beta": OK}, {}, 0,
     ["server: 2 passed (2 expected), 0 all-skipped (0 expected), 0 failed, 1 not run, as listed "
      "— ok"]),
    ("an expected skip is accepted", "server", WITH_SKIP, SUITE + ["gamma"],
     {"alpha": OK, "beta": OK, "gamma": ALL_SKIPPED}, {}, 0,
     ["SKIP gamma", "1 all-skipped (1 expected)", "— ok"]),
    ("one failing scenario", "server", BASE, SUITE, {"alpha": OK, "beta": FAILING}, {}, 1,
     ["- beta: expected to pass (", "), FAILED", "! 1 scenario passed", "1 failed"]),
    ("a WARNING fails", "server", BASE, SUITE, {"alpha": OK, "beta": WARNING}, {}, 1,
     ["- beta: expected to pass (", "), FAILED"]),
    ("a non-zero suite exit fails clean checks", "client", BASE, SUITE,
     {"alpha": OK, "beta": OK}, {"beta": 1}, 1, ["- beta: expected to pass (", "), FAILED"]),
    ("an unexpected all-skipped scenario", "server", BASE, SUITE + ["epsilon"],
     {"alpha": OK, "beta": OK, "epsilon": ALL_SKIPPED}, {}, 1,
     ["- epsilon: no check passed (all SKIPPED), and"]),
    ("a scenario with no checks at all counts as all-skipped", "server", BASE, SUITE + ["epsilon"],
     {"alpha": OK, "beta": OK, "epsilon": []}, {}, 1,
     ["- epsilon: no check passed (all SKIPPED), and"]),
    ("an expected pass that skipped everything", "server", BASE, SUITE,
     {"alpha": OK, "beta": ALL_SKIPPED}, {}, 1,
     ["- beta: expected to pass (", "nothing was verified"]),
    ("wire-schema-valid alone is not a pass", "server", BASE, SUITE,
     {"alpha": OK, "beta": RUNNER_ONLY}, {}, 1,
     ["- beta: expected to pass (", "nothing was verified"]),
    ("an extra unexpected pass", "server", BASE, SUITE + ["epsilon"],
     {"alpha": OK, "beta": OK, "epsilon": OK}, {}, 1,
     ["+ epsilon: passes, but is not in", "add `pass epsilon`", "! 3 scenarios passed",
      "lists 2 as pass"]),
    ("a missing scenario", "server", BASE, SUITE, {"alpha": OK}, {}, 1,
     ["- beta: expected to pass (", "but did not run (no checks.json)", "! 1 scenario passed"]),
    ("a suite scenario with no line", "server", BASE, SUITE + ["zeta"],
     {"alpha": OK, "beta": OK}, {}, 1,
     ["- zeta: in the suite's list, but not in"]),
    ("a stale line", "server", BASE, ["alpha", "delta"], {"alpha": OK, "beta": OK}, {}, 1,
     ["- beta: ", "names a scenario the suite's list does not have"]),
    ("an expected skip that now passes", "server", WITH_SKIP, SUITE + ["gamma"],
     {"alpha": OK, "beta": OK, "gamma": OK}, {}, 1,
     ["+ gamma: now passes, but", "change that line to `pass gamma`"]),
    ("an expected skip that fails", "server", WITH_SKIP, SUITE + ["gamma"],
     {"alpha": OK, "beta": OK, "gamma": FAILING}, {}, 1, ["- gamma: expected all-skipped ("]),
    ("a not-run scenario that ran and passed", "client", BASE, SUITE,
     {"alpha": OK, "beta": OK, "delta": OK}, {}, 1, ["+ delta: ran and passed, but"]),
    ("the whole run's exit status", "server", BASE, SUITE, {"alpha": OK, "beta": OK}, {"*": 1}, 1,
     ["- the suite's run exited with status 1"]),
    ("client names with a slash", "client",
     "pass tools_call\nnot-run auth/basic-cimd needs OAuth\n",
     ["tools_call", "auth/basic-cimd"], {"tools_call": OK, "auth/basic-cimd": OK}, {}, 1,
     ["+ auth/basic-cimd: ran and passed, but"]),
    ("strict mode: all-skipped is not a pass", "server", None, None,
     {"alpha": OK, "gamma": ALL_SKIPPED}, {}, 1,
     ["SKIP gamma", "conformance: 1 passed, 0 failed, 1 all-skipped"]),
]

BAD_FILES = [
    ("skip without a reason", "skip gamma\n", "needs a reason on the same line"),
    ("not-run without a reason", "not-run delta   \n", "needs a reason on the same line"),
    ("a duplicate line", "pass alpha\nskip alpha why\n", "already listed on line 1"),
    ("an unknown kind", "passes alpha\n", "unknown kind 'passes'"),
    ("a pass with a reason", "pass alpha because\n", "a pass line takes no reason"),
]


def write_case(root, mode, runs, status):
    for name, rows in runs.items():
        folder = os.path.join(root, f"{prefix_for(mode)}{name}-2026-01-01T00-00-00-000Z")
        os.makedirs(folder)
        with open(os.path.join(folder, "checks.json"), "w", encoding="utf-8") as f:
            json.dump([{"id": i, "status": s} for i, s in rows], f)
    with open(os.path.join(root, "suite-status.tsv"), "w", encoding="utf-8") as f:
        for name, rc in status.items():
            f.write(f"{name}\t{rc}\t\n")


def run_case(case):
    """Runs one self-test case; returns (passed, what to print)."""
    title, mode, text, suite, runs, status, want_rc, want_lines = case
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "out")
        os.makedirs(root)
        write_case(root, mode, runs, status)
        argv = ["conformance-summary.py", mode, root]
        if text is not None:
            argv += ["--expected", os.path.join(tmp, "expected.txt")]
            with open(argv[-1], "w", encoding="utf-8") as f:
                f.write(text)
        if suite is not None:
            argv += ["--suite-list", os.path.join(tmp, "suite.txt")]
            with open(argv[-1], "w", encoding="utf-8") as f:
                f.write("\n".join(suite) + "\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(argv)
    output = out.getvalue().replace(tmp, "TMP")
    missing = [w for w in want_lines if w not in output]
    if rc != want_rc or missing:
        return False, (f"FAIL {title}: exit {rc} (want {want_rc}); not found: {missing}\n"
                       + indent(output, "       | "))
    shown = [line.strip() for line in output.splitlines()
             if line.strip()[:2] in ("- ", "+ ", "! ") or line.startswith(f"{mode}: ")]
    return True, f"ok   {title}: exit {rc}; " + (" / ".join(shown) or output.splitlines()[-1])


def self_test():
    """Runs every case; prints what each caught; returns 1 if any was not caught."""
    failures = 0
    for case in SELF_TEST_CASES:
        ok, report = run_case(case)
        failures += not ok
        print(report)
    for title, text, want in BAD_FILES:
        try:
            parse_expected(text, "expected.txt")
            ok, report = False, f"FAIL {title}: accepted"
        except ExpectationError as e:
            ok = want in str(e)
            report = f"{'ok  ' if ok else 'FAIL'} {title}: {e}"
        failures += not ok
        print(report)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance-expected")
    for side in ("server", "client"):
        path = os.path.join(here, f"{side}.txt")
        try:
            kinds = [kind for kind, _, _ in read_expected(path).values()]
            print(f"ok   {path} parses: " + ", ".join(f"{kinds.count(k)} {k}" for k in KINDS))
        except ExpectationError as e:
            failures += 1
            print(f"FAIL {e}")
    total = len(SELF_TEST_CASES) + len(BAD_FILES) + 2
    print(f"conformance-summary self-test: {total - failures} of {total} ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
