"""``make bench-load``: a bounded locust load test of the embedded mode's API, on loopback.

``python -m jobsched.bench.load [--users 8] [--tenants 4] [--seconds 30] [--requests 200]`` starts
``jobsched dev`` (no demo jobs, ``--tenants`` tenants) on a free port of 127.0.0.1, runs
:mod:`jobsched.bench.locustfile` headless against it (``--users`` users, each stopping after
``--requests`` tasks or when ``--seconds`` are over), then checks from the API that no run was lost
or duplicated: every run a trigger answered with is listed exactly once for its tenant, no other run
exists, and every run ends (``succeeded`` or ``cancelled``) within ``--settle`` seconds. It prints the
throughput, p50/p99 latency and errors per route, and the ledger check; the exit status is 1 when any
request failed or a run was lost, duplicated or left unfinished.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from jobsched.client import ApiClient
from jobsched.local.server import free_port

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
TERMINAL = {"succeeded", "cancelled", "failed", "skipped"}


@dataclass
class LedgerCheck:
    triggered: int = 0
    jobs: int = 0
    listed: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.unfinished)


class DevServer:
    """``jobsched dev`` in a child process, with ``tenants`` tenants ``load-<n>`` / ``tok-load-<n>``."""

    def __init__(self, tenants: int):
        self.tokens = {f"tok-load-{n}": f"load-{n}" for n in range(tenants)}
        self.url = f"http://127.0.0.1:{free_port()}"
        args = [f"--tenant={tenant}={token}" for token, tenant in self.tokens.items()]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
        self.log_dir = tempfile.mkdtemp(prefix="jobsched-load-logs-")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobsched.cli",
                "dev",
                "--port",
                self.url.rsplit(":", 1)[1],
                "--no-demo",
                "--log-dir",
                self.log_dir,
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**env, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any("API on" in line for line in self.lines):
                ApiClient(self.url, timeout=60).request("GET", "/openapi.json")  # warm the document
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("jobsched dev did not start:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def run_locust(
    url: str, tokens: list[str], *, users: int, seconds: int, requests: int, workdir: Path
) -> Path:
    """Run the locustfile headless; returns the path prefix of its CSV statistics."""
    prefix = workdir / "load"
    env = {
        **os.environ,
        "JOBSCHED_LOAD_TOKENS": ",".join(tokens),
        "JOBSCHED_LOAD_REQUESTS": str(requests),
        "JOBSCHED_LOAD_LEDGER": str(workdir / "ledger.jsonl"),
    }
    command = [
        sys.executable,
        "-m",
        "jobsched.bench.locust_main",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--users",
        str(users),
        "--spawn-rate",
        str(users),
        "--run-time",
        f"{seconds}s",
        "--host",
        url,
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "10",
        "--loglevel",
        "WARNING",
        "--exit-code-on-error",
        "0",
    ]
    subprocess.run(command, env=env, check=True, timeout=seconds + 120, capture_output=True, text=True)
    return prefix


def read_stats(prefix: Path) -> list[dict[str, str]]:
    with open(f"{prefix}_stats.csv", newline="", encoding="utf-8") as rows:
        return list(csv.DictReader(rows))


def check_ledger(url: str, tokens: dict[str, str], ledger: Path, *, settle: float) -> LedgerCheck:
    """Compare the runs the triggers answered with the runs the API lists, per tenant."""
    entries = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    check = LedgerCheck(jobs=sum(1 for e in entries if "run" not in e))
    deadline = time.monotonic() + settle
    for token in tokens:
        expected = {e["run"] for e in entries if e.get("tenant") == token and "run" in e}
        check.triggered += len(expected)
        client = ApiClient(url, token=token, timeout=60)
        while True:
            listed = client.list_all("/runs", {"limit": 200})
            pending = [r["id"] for r in listed if r["state"] not in TERMINAL]
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        counts = Counter(r["id"] for r in listed)
        check.listed += len(listed)
        check.lost += sorted(expected - set(counts))
        check.duplicated += sorted(i for i, n in counts.items() if n > 1)
        check.unexpected += sorted(set(counts) - expected)
        check.unfinished += pending
        check.states.update(r["state"] for r in listed)
    return check


def report(stats: list[dict[str, str]], check: LedgerCheck, *, users: int, tenants: int, seconds: int) -> str:
    lines = [
        f"locust, {users} users over {tenants} tenants, at most {seconds} s, loopback, embedded mode",
        "",
        "| route | requests | failures | req/s | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in stats:
        name = row["Name"] if row["Name"] != "Aggregated" else "**all**"
        lines.append(
            f"| {name} | {row['Request Count']} | {row['Failure Count']} | "
            f"{float(row['Requests/s']):.1f} | {row['50%']} | {row['99%']} |"
        )
    lines += [
        "",
        f"jobs created {check.jobs}; runs triggered {check.triggered}, listed {check.listed}; "
        f"lost {len(check.lost)}, duplicated {len(check.duplicated)}, unexpected {len(check.unexpected)}, "
        f"unfinished {len(check.unfinished)}; states {dict(sorted(check.states.items()))}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--requests", type=int, default=200, help="tasks per user before it stops")
    parser.add_argument("--settle", type=float, default=120.0, help="seconds for the runs to end")
    args = parser.parse_args(argv)
    server = DevServer(args.tenants)
    try:
        server.wait_ready()
        with tempfile.TemporaryDirectory(prefix="jobsched-load-") as tmp:
            workdir = Path(tmp)
            prefix = run_locust(
                server.url,
                list(server.tokens),
                users=args.users,
                seconds=args.seconds,
                requests=args.requests,
                workdir=workdir,
            )
            stats = read_stats(prefix)
            check = check_ledger(server.url, server.tokens, workdir / "ledger.jsonl", settle=args.settle)
    finally:
        server.stop()
    print(report(stats, check, users=args.users, tenants=args.tenants, seconds=args.seconds))
    failures = sum(int(row["Failure Count"]) for row in stats if row["Name"] == "Aggregated")
    return 0 if failures == 0 and check.clean else 1


if __name__ == "__main__":
    sys.exit(main())
