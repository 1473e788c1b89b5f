"""``jobsched bench``: cost per million runs, and the embedded-mode schedule lag.

By default both benchmarks run: the run pipeline (``--runs N`` cron runs end to end in-process against
moto, priced at us-east-1 list prices) and the lag of a burst of ``--lag-runs`` one-off runs due in the
same second in the embedded mode. ``--no-lag`` runs only the first, ``--lag`` only the second.
``--workflow`` runs, alone, the DAG-workflow benchmark (:mod:`jobsched.bench.workflow`: ``--workflow-runs``
runs of ``--workflows`` per-minute 10-node diamonds, cost per workflow run and per node, beside plain
runs measured by the same harness; exit status 1 if a node ran twice or was lost).
``--noisy`` runs, alone, the noisy-neighbour benchmark (:mod:`jobsched.bench.noisy`: a quiet tenant's
lag while another tenant's burst of ``--noisy-runs`` runs floods the ``default`` queue, with fair
queues on and off; a few minutes, so not part of the default run). ``--listing`` runs, alone, the
listing benchmark (:mod:`jobsched.bench.listing`: listing by state after two 1000-run backfills, before
and after a sweep). ``--soak MINUTES`` runs, alone, the embedded mode's footprint benchmark
(:mod:`jobsched.bench.soak`: ``jobsched dev`` with its demo jobs, plus ``--soak-jobs N`` per-second jobs,
for MINUTES of real time: CPU, memory of each process, lag of the first and last minute).
``--scaling`` runs, alone, the scaling model (:mod:`jobsched.bench.scaling`: the pipeline's measured
requests per run times AWS's published limits at 1,000, 10,000 and 100,000 runs per second, under
``--call-ms`` per call and ``--run-seconds`` per run; JSON key ``scaling``; docs/scaling.md).
``--limits`` runs, alone, the limits benchmark (:mod:`jobsched.bench.limits`: the cost per run of a
limited job against an unlimited one and of one wait, in-process; then a rate-limited job's observed
rate over a minute in the embedded mode, about 80 s; ``--no-rate`` skips that part).

With ``--json`` the LAST line of stdout is exactly one JSON object: the pipeline figures at the top level
(``runs``, ``succeeded``, ``duplicates``, ``lost``, ``wru``, ``rru``, ``sqs_requests``,
``lambda_invocations``, ``usd_per_million_runs``, ``breakdown``...), the AWS estimate under
``aws_estimate`` (:mod:`jobsched.bench.aws_estimate`: the measured requests, Lambda duration modelled
from the calls, the early-arrival wait simulated with the real dispatcher before and after
decision 0032; ``--no-estimate`` skips it, ``--estimate-scale`` sets the larger scale it is also
simulated at) and the lag figures under ``lag``
(or at the top level with ``--lag``); with ``--noisy`` the object holds the noisy-neighbour figures
alone, and likewise with ``--listing`` and ``--soak``; with ``--idle`` the idle figure
(:mod:`jobsched.bench.idle`: ``--idle-jobs`` monthly crons, ``--idle-hours`` of ticks and sweeps) under
the key ``idle``; with ``--burst`` the burst figure (:mod:`jobsched.bench.burst`: ``--burst-jobs`` daily
crons due in the same minute, and 100 as the steady-state reference) under the key ``burst``. What
the functions print while the benchmark runs (Powertools JSON logs, EMF metrics lines) and the
warnings raised meanwhile are dropped, so the terminal shows the report alone; ``--verbose`` sends
them to stderr instead. Exit status 1 when a run was duplicated or lost (or, in the burst, enqueued
late), the tenants' usage missed the measured cost by more than 2 % (``usage_attribution``, decision
0059), a lag run never started, a run of the noisy-neighbour benchmark never started, the idle
figure saw an unmetered call, or the soak's embedded mode stopped answering or ran no run in its
first or last minute; a cost, lag, idle or noisy-neighbour goal that is not met is reported in the
figures (``goal_met``; counting's raise of the cost per run over 1 %:
``usage_attribution.counting_raise_within_limit``), not in the exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import redirect_stdout
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.ids import DUE_PARTITIONS
from jobsched.core.shares import MEASURED_FAIR_SHARE, check_share


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``bench`` subcommand."""
    parser = subparsers.add_parser(
        "bench",
        help="measure cost per million runs and the embedded-mode schedule lag",
        description="Cost benchmark (in-process, moto) and schedule-lag benchmark (embedded mode).",
    )
    parser.add_argument(
        "--runs", type=int, default=1000, help="cron runs in the cost benchmark (default 1000)"
    )
    parser.add_argument("--jobs", type=int, default=100, help="per-minute cron jobs that make the runs (100)")
    parser.add_argument(
        "--all-cpus",
        action="store_true",
        help="run the cost benchmark's simulation on every CPU rather than on one (docs/performance.md)",
    )
    parser.add_argument(
        "--shards", type=int, default=None, help="dispatcher shards (default: the deployment's)"
    )
    parser.add_argument(
        "--payload-bytes", type=int, default=1024, help="payload size in bytes (default 1024)"
    )
    parser.add_argument(
        "--deadline-seconds",
        type=int,
        default=0,
        help="give the cost benchmark's jobs this deadline (default 0: none; docs/performance.md)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--lag", action="store_true", help="run only the schedule-lag benchmark")
    which.add_argument(
        "--idle",
        action="store_true",
        help="run only the idle figure: what registered jobs cost between occurrences (a few minutes)",
    )
    which.add_argument("--no-lag", action="store_true", help="run only the cost benchmark")
    which.add_argument(
        "--burst",
        action="store_true",
        help="run only the burst figure: --burst-jobs daily crons due in the same minute (a minute or more)",
    )
    parser.add_argument(
        "--burst-jobs",
        type=int,
        default=None,
        help="jobs due in the same minute in --burst (default 1000; 10000 takes many minutes)",
    )
    which.add_argument(
        "--noisy",
        action="store_true",
        help="run only the noisy-neighbour benchmark (fair queues on and off; a few minutes)",
    )
    which.add_argument(
        "--peak",
        action="store_true",
        help="run only the peak model: 10,000 runs at 09:00:00, with and without pre-warming",
    )
    which.add_argument(
        "--listing",
        action="store_true",
        help="run only the listing benchmark (listing by state after two 1000-run backfills)",
    )
    which.add_argument(
        "--soak",
        type=float,
        metavar="MINUTES",
        default=None,
        help="run only the soak benchmark: jobsched dev for MINUTES of real time (CPU, memory, lag)",
    )
    parser.add_argument(
        "--soak-jobs", type=int, default=0, help="per-second jobs added to the demo jobs in --soak (0)"
    )
    parser.add_argument(
        "--soak-retention-minutes",
        type=int,
        default=None,
        metavar="MINUTES",
        help="run the soak's jobsched dev with --retention-minutes MINUTES (at least 10; default: its days)",
    )
    parser.add_argument(
        "--soak-port",
        type=int,
        default=None,
        help="API port of the soak's jobsched dev (default: a free one)",
    )
    which.add_argument(
        "--scaling",
        action="store_true",
        help="run only the scaling model: measured requests per run x AWS limits at 1k/10k/100k runs/s",
    )
    parser.add_argument(
        "--call-ms", type=float, default=5.0, help="with --scaling: assumed ms per DynamoDB/SQS call (5)"
    )
    parser.add_argument(
        "--run-seconds", type=float, default=1.0, help="with --scaling: assumed handler seconds per run (1)"
    )
    which.add_argument(
        "--limits",
        action="store_true",
        help="run only the limits benchmark (cost of a limited run and of a wait; a rate over a minute)",
    )
    parser.add_argument(
        "--no-rate", action="store_true", help="with --limits: skip the minute-long rate part"
    )
    which.add_argument(
        "--workflow",
        action="store_true",
        help="run only the DAG-workflow benchmark (a 10-node diamond: cost per workflow run and per node)",
    )
    parser.add_argument(
        "--workflow-runs", type=int, default=100, help="workflow runs in the workflow benchmark (default 100)"
    )
    parser.add_argument(
        "--workflows", type=int, default=10, help="per-minute workflows that make them (default 10)"
    )
    parser.add_argument(
        "--no-estimate",
        action="store_true",
        help="skip the AWS estimate after the cost benchmark (its tick simulation takes a few minutes)",
    )
    parser.add_argument(
        "--estimate-scale",
        type=int,
        default=10,
        help="the AWS estimate's early-arrival wait is also simulated at this many times the jobs (10; "
        "0 or 1: not)",
    )
    parser.add_argument("--lag-runs", type=int, default=100, help="runs in the lag burst (default 100)")
    parser.add_argument(
        "--noisy-runs",
        type=int,
        default=None,
        help="runs in the noisy tenant's burst (default 2000; 300 with --noisy-run-seconds)",
    )
    parser.add_argument(
        "--noisy-run-seconds",
        type=float,
        default=0.0,
        help="with --noisy: the long-run variant, a burst of demo.sleep runs this long filling every slot, "
        "with and without the fair share, and the bursting tenant alone (decision 0057; 0: the short burst)",
    )
    parser.add_argument(
        "--fair-share",
        type=float,
        default=MEASURED_FAIR_SHARE,
        help="the fair share the long-run variant and the model measure (0.1..1; default %(default)s)",
    )
    parser.add_argument(
        "--idle-jobs", type=int, default=200, help="monthly crons registered in the idle figure (200)"
    )
    parser.add_argument(
        "--idle-hours", type=int, default=24, help="simulated hours of ticks and sweeps per day (24)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="also show the functions' logs, EMF metrics and warnings (on stderr)",
    )
    parser.set_defaults(func=run)


def _validate(args: argparse.Namespace) -> None:
    if args.runs < 1 or args.jobs < 1:
        raise ValidationError("--runs and --jobs must be at least 1")
    if args.shards is not None and not 1 <= args.shards <= DUE_PARTITIONS:
        raise ValidationError(f"--shards must be 1..{DUE_PARTITIONS}")
    if not 11 <= args.payload_bytes <= 64 * 1024:
        raise ValidationError("--payload-bytes must be 11..65536")
    if not 0 <= getattr(args, "estimate_scale", 10) <= 100:
        raise ValidationError("--estimate-scale must be 0..100")
    if not 1 <= args.lag_runs <= 1000:
        raise ValidationError("--lag-runs must be 1..1000")
    if args.noisy_runs is None:
        args.noisy_runs = 300 if getattr(args, "noisy_run_seconds", 0) > 0 else 2000
    if not 100 <= args.noisy_runs <= 5000:
        raise ValidationError("--noisy-runs must be 100..5000")
    if not 0 <= getattr(args, "noisy_run_seconds", 0.0) <= 600:
        raise ValidationError("--noisy-run-seconds must be 0..600")
    check_share(getattr(args, "fair_share", MEASURED_FAIR_SHARE), "--fair-share")
    if not 1 <= args.idle_jobs <= 100_000 or not 1 <= args.idle_hours <= 24:
        raise ValidationError("--idle-jobs must be 1..100000 and --idle-hours 1..24")
    if args.burst_jobs is not None and not 1 <= args.burst_jobs <= 100_000:
        raise ValidationError("--burst-jobs must be 1..100000")
    if args.soak is not None and not 1 <= args.soak <= 24 * 60:
        raise ValidationError("--soak MINUTES must be 1..1440")
    if not 0 <= args.soak_jobs <= 100:
        raise ValidationError("--soak-jobs must be 0..100")
    if args.soak_retention_minutes is not None and args.soak_retention_minutes < 10:
        raise ValidationError("--soak-retention-minutes must be at least 10")
    if not 0.1 <= args.call_ms <= 1000 or not 0 <= args.run_seconds <= 900:
        raise ValidationError("--call-ms must be 0.1..1000 and --run-seconds 0..900")
    if not 1 <= args.workflow_runs <= 5000 or not 1 <= args.workflows <= 1000:
        raise ValidationError("--workflow-runs must be 1..5000 and --workflows 1..1000")


def run(args: argparse.Namespace) -> int:
    """Run the chosen benchmarks; print the report (or the JSON object) on stdout."""
    _validate(args)
    figures: dict[str, Any] = {}
    ok = True
    stdout = sys.stdout
    if args.listing or args.soak is not None or args.scaling or args.peak:
        return _alone(args, stdout)
    # Functions and moto may print (logs, metrics); keep stdout for our report alone.
    with _function_output(args.verbose):
        if args.limits:
            from jobsched.bench.limits import run_limits

            figures = run_limits(runs=min(args.runs, 1000), rate=not args.no_rate)
            print_report(figures, args, stdout)
            return 0
        if args.idle:
            from jobsched.bench.idle import IdleConfig, run_idle
            from jobsched.runtime import resources

            figures = {
                "idle": run_idle(
                    IdleConfig(
                        jobs=args.idle_jobs,
                        hours=args.idle_hours,
                        shards=args.shards or resources.DEFAULT_SHARDS,
                    )
                )
            }
            ok = not figures["idle"]["unmetered_calls"]
        if args.burst:
            from jobsched.bench.burst import DEFAULT_JOBS, BurstConfig, run_burst
            from jobsched.runtime import resources

            figures = {
                "burst": run_burst(
                    BurstConfig(
                        jobs=args.burst_jobs or DEFAULT_JOBS,
                        shards=args.shards or resources.DEFAULT_SHARDS,
                        payload_bytes=args.payload_bytes,
                    )
                )
            }
            burst = figures["burst"]
            ok = not burst["lost"] and not burst["duplicates"] and not burst["enqueued_late"]
            print_report(figures, args, stdout)
            return 0 if ok else 1
        if args.noisy and args.noisy_run_seconds > 0:
            from jobsched.bench.noisy import NoisyConfig, run_noisy_long
            from jobsched.bench.share_model import ShareModelConfig, run_share_model

            figures = run_noisy_long(
                NoisyConfig(
                    burst_runs=args.noisy_runs,
                    run_seconds=args.noisy_run_seconds,
                    fair_share=args.fair_share,
                    timeout_seconds=max(240.0, 4 * args.noisy_run_seconds * args.noisy_runs / 200),
                )
            )
            figures["model"] = run_share_model(
                ShareModelConfig(run_seconds=args.noisy_run_seconds, fair_share=args.fair_share)
            )
            ok = bool(figures["complete"])
        elif args.noisy:
            from jobsched.bench.noisy import NoisyConfig, run_noisy

            figures = run_noisy(NoisyConfig(burst_runs=args.noisy_runs))
            ok = bool(figures["complete"])
        if args.workflow:
            from jobsched.bench.workflow import WorkflowBenchConfig, run_workflow_bench

            figures = run_workflow_bench(
                WorkflowBenchConfig(
                    workflow_runs=args.workflow_runs,
                    workflows=args.workflows,
                    payload_bytes=args.payload_bytes,
                    **({"shards": args.shards} if args.shards else {}),
                )
            )
            ok = not figures["nodes_run_twice"] and not figures["lost"]
        elif not args.lag and not args.noisy and not args.idle:
            from jobsched.bench.pipeline import PipelineConfig, run_pipeline
            from jobsched.runtime import resources

            config = PipelineConfig(
                runs=args.runs,
                jobs=args.jobs,
                shards=args.shards or resources.DEFAULT_SHARDS,
                payload_bytes=args.payload_bytes,
                deadline_seconds=args.deadline_seconds,
                one_cpu=not getattr(args, "all_cpus", False),
            )
            result = run_pipeline(config)
            figures.update(result.to_dict())
            ok = ok and not result.duplicates and not result.lost and result.attribution_ok()
            if not getattr(args, "no_estimate", False) and result.succeeded:
                from jobsched.bench import aws_estimate

                scale = getattr(args, "estimate_scale", 10)
                figures["aws_estimate"] = aws_estimate.run_estimate(figures, scale=scale)
        if not args.no_lag and not args.noisy and not args.idle and not args.workflow:
            from jobsched.bench.lag import LagConfig, run_lag

            lag = run_lag(LagConfig(runs=args.lag_runs)).to_dict()
            ok = ok and lag["not_started"] == 0
            if args.lag:
                figures.update(lag)
            else:
                figures["lag"] = lag
    print_report(figures, args, stdout)
    return 0 if ok else 1


def _alone(args: argparse.Namespace, stdout: Any) -> int:
    """``--listing``, ``--soak``, ``--scaling`` or ``--peak``: one benchmark, its own report (or its JSON
    object)."""
    if args.peak:
        from jobsched.bench.peak import peak_text, run_peak

        peak = run_peak()
        print(
            json.dumps({"peak": peak}, separators=(",", ":")) if args.json else peak_text(peak), file=stdout
        )
        return 0
    if args.scaling:
        from jobsched.bench.scaling import Assumptions, run_scaling, scaling_text
        from jobsched.runtime import resources

        assume = Assumptions(
            call_ms=args.call_ms,
            run_seconds=args.run_seconds,
            shards=args.shards or resources.DEFAULT_SHARDS,
        )
        try:
            with _function_output(args.verbose):
                scaling = run_scaling(assume=assume)
        except RuntimeError as exc:  # the measurement lost or duplicated a run: no model from it
            print(f"scaling model not computed: {exc}", file=sys.stderr)
            return 1
        figures = {"scaling": scaling}
        print(json.dumps(figures, separators=(",", ":")) if args.json else scaling_text(scaling), file=stdout)
        return 0
    if args.listing:
        from jobsched.bench.listing import report as listing_report
        from jobsched.bench.listing import run_listing

        with _function_output(args.verbose):
            figures = run_listing()
        text = listing_report(figures)
        print(json.dumps(figures, separators=(",", ":")) if args.json else text, file=stdout)
        return 0
    from jobsched.bench.soak import SoakConfig, report, run_soak

    with _function_output(args.verbose):
        figures = run_soak(
            SoakConfig(
                minutes=args.soak,
                per_second_jobs=args.soak_jobs,
                retention_minutes=args.soak_retention_minutes,
                port=args.soak_port,
            )
        )
    ok = bool(figures["ok"])
    print(json.dumps(figures, separators=(",", ":")) if args.json else report(figures), file=stdout)
    return 0 if ok else 1


@contextlib.contextmanager
def _function_output(verbose: bool) -> Iterator[None]:
    """While the benchmark runs: what is printed on stdout and the warnings raised go to stderr
    (``--verbose``) or nowhere."""
    if verbose:
        with redirect_stdout(sys.stderr):
            yield
        return
    with open(os.devnull, "w") as sink, redirect_stdout(sink), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def print_report(figures: dict[str, Any], args: argparse.Namespace, out: Any) -> None:
    from jobsched.bench.report import idle_text, lag_text, noisy_text, pipeline_text

    if args.json:
        print(json.dumps(figures, separators=(",", ":")), file=out)
        return
    if getattr(args, "limits", False):
        print(json.dumps(figures, indent=2), file=out)
        return
    if getattr(args, "burst", False):
        from jobsched.bench.burst import burst_text

        print(burst_text(figures["burst"]), file=out)
        return
    if args.idle:
        print(idle_text(figures["idle"]), file=out)
        return
    if args.noisy and getattr(args, "noisy_run_seconds", 0) > 0:
        from jobsched.bench.report import noisy_long_text

        print(noisy_long_text(figures), file=out)
        return
    if args.noisy:
        print(noisy_text(figures), file=out)
        return
    if args.workflow:
        from jobsched.bench.workflow import workflow_text

        print(workflow_text(figures), file=out)
        return
    parts = []
    if not args.lag:
        text = pipeline_text(figures)
        if figures.get("aws_estimate"):
            from jobsched.bench.aws_estimate import estimate_text

            text += "\n" + estimate_text(figures["aws_estimate"])
        parts.append(text)
    if args.lag:
        parts.append(lag_text(figures))
    elif not args.no_lag:
        parts.append(lag_text(figures["lag"]))
    print("\n\n".join(parts), file=out)
