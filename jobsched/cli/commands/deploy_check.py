"""``jobsched deploy-check``: refuse a deploy whose handler code would strand jobs, runs or dead letters.

Run it before ``cdk deploy``, in the project that is about to be deployed (docs/deploy.md,
docs/handlers.md "Deploying new handler code"). It imports the handler modules of that code into this
process's registry, as the deployed API and workers will (``jobsched.targets.demo`` always, then
``--handler-modules``, else ``$JOBSCHED_HANDLER_MODULES``, else the ``handler_modules`` of ``./cdk.json``'s
context), asks the deployed API what still refers to handlers (``GET /handlers?scope=all``, an
administrator's call), and compares the two (:mod:`jobsched.core.deploy_guard`, decision 0050).

Exit 0 when nothing would be stranded; 1 when something would (each problem on a line, with the jobs
and runs that refer to it) or the API could not be asked; 2 for a usage error or a handler module that
does not import. ``--force`` goes on (exit 0) after recording the forced check with
``POST /handlers/deploy-checks``; ``--first-deploy`` asks no API (there is none yet) and only checks
that the handler modules import.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jobsched.cli.commands._api_args import EXIT_OK, UsageError, api_options, command
from jobsched.cli.commands._output import print_json
from jobsched.client import ApiClient, ApiError
from jobsched.core.deploy_guard import Problem, code_from, strandings
from jobsched.local.code_version import local_code_version
from jobsched.runtime.resources import ENV_CODE_VERSION, ENV_HANDLER_MODULES
from jobsched.runtime.settings import handler_modules_from
from jobsched.targets import registry

#: Every deployment loads the demo handlers (jobsched.compose.api.DEFAULT_HANDLER_MODULES).
ALWAYS_LOADED = ("jobsched.targets.demo",)
#: The code version the deployment's functions record on each attempt (decision 0048).
#: The exit status of a refusal (the same as an API error's: the deploy must not go on).
EXIT_REFUSED = 1
HANDLERS_PATH = "/handlers"
DEPLOY_CHECKS_PATH = "/handlers/deploy-checks"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``deploy-check`` subcommand."""
    parser = subparsers.add_parser(
        "deploy-check",
        parents=[api_options()],
        help="refuse a deploy whose handler code would strand jobs, queued runs, retries or dead letters",
        description=(
            "Compare the handlers of the code about to be deployed with what the deployed system still "
            "refers to (GET /handlers?scope=all, as an administrator). Exit 1, listing each problem, when "
            "the new code lacks a referenced handler or version or cannot take an unpinned job's payload."
        ),
    )
    parser.add_argument(
        "--handler-modules",
        metavar="M,...",
        help=f"the new code's handler modules (default: ${ENV_HANDLER_MODULES}, else cdk.json's "
        "handler_modules); jobsched.targets.demo is always loaded",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="go on (exit 0) despite problems; the forced check is recorded (POST /handlers/deploy-checks)",
    )
    parser.add_argument(
        "--first-deploy",
        action="store_true",
        help="there is no deployed API yet: check only that the handler modules import",
    )
    parser.add_argument(
        "--code-version",
        help=f"the new code's version, recorded with a forced check (default: ${ENV_CODE_VERSION}, "
        "else the git revision of this directory, else 'dev')",
    )
    parser.add_argument(
        "--cdk-json",
        type=Path,
        default=Path("cdk.json"),
        help="where handler_modules is read (default ./cdk.json)",
    )
    parser.set_defaults(func=cmd_deploy_check)


@command
def cmd_deploy_check(args: argparse.Namespace, client: ApiClient) -> int:
    modules = new_code_modules(args.handler_modules, os.environ, args.cdk_json)
    import_handler_modules(modules)
    code = code_from(entry.describe() for entry in registry.catalogue())
    versions = sum(len(v) for v in code.values())
    if args.first_deploy:
        if args.json:
            print_json({"ok": True, "first_deploy": True, "modules": list(modules), "problems": []})
        elif not args.quiet:
            print(
                f"deploy-check: no deployed API: nothing to strand (first deploy); the new code registers "
                f"{versions} handler versions ({', '.join(modules)})"
            )
        return EXIT_OK
    try:
        listing = client.request("GET", HANDLERS_PATH, query={"scope": "all"})
    except ApiError as exc:
        if exc.status == 0:
            exc.message += " (the first deploy of a stack has no API yet: pass --first-deploy)"
        elif exc.status == 404:
            exc.message += (
                " (a deployment made before handler versions has no GET /handlers: every handler it has "
                "is version 1; keep them all in the new code and deploy once with --first-deploy)"
            )
        raise
    problems = strandings(listing, code)
    code_version = args.code_version or code_version_of(os.environ, Path.cwd())
    recorded = record_forced(client, code_version, problems) if problems and args.force else None
    if args.json:
        print_json(
            {
                "ok": not problems,
                "forced": recorded is not None,
                "code_version": code_version,
                "deployed_code_version": listing.get("code_version"),
                "modules": list(modules),
                "problems": [p.describe() for p in problems],
                **({"record": recorded} if recorded is not None else {}),
            }
        )
    elif not args.quiet or problems:
        print(report(problems, versions, listing.get("code_version"), forced=recorded is not None))
    return EXIT_OK if not problems or args.force else EXIT_REFUSED


def new_code_modules(flag: str | None, environ: Mapping[str, str], cdk_json: Path) -> tuple[str, ...]:
    """The new code's handler modules: ``--handler-modules`` > ``$JOBSCHED_HANDLER_MODULES`` > the
    ``handler_modules`` of cdk.json's context (a list or a comma-separated string); the demo first."""
    if flag is not None:
        extra = handler_modules_from(flag)
    elif environ.get(ENV_HANDLER_MODULES, "").strip():
        extra = handler_modules_from(environ[ENV_HANDLER_MODULES])
    else:
        extra = _cdk_json_modules(cdk_json)
    return tuple(dict.fromkeys((*ALWAYS_LOADED, *extra)))


def _cdk_json_modules(path: Path) -> tuple[str, ...]:
    try:
        context = json.loads(path.read_text()).get("context") or {}
    except FileNotFoundError:
        return ()
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read its context: {exc}") from None
    raw = context.get("handler_modules") or ()
    return handler_modules_from(raw if isinstance(raw, str) else ",".join(str(m) for m in raw))


def import_handler_modules(modules: Sequence[str]) -> None:
    """Import each module (from this directory's project too, as ``jobsched dev`` does); a module that
    does not import is a usage error naming it: that code must not be deployed either."""
    if os.getcwd() not in sys.path:  # a console script does not put it there, unlike `python -m`
        sys.path.insert(0, os.getcwd())
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # any error of the user's module: the code is not deployable
            raise UsageError(
                f"handler module {module!r} does not import: {type(exc).__name__}: {exc}"
            ) from None


def code_version_of(environ: Mapping[str, str], directory: Path) -> str:
    """``$JOBSCHED_CODE_VERSION``, else the git revision of ``directory`` as the embedded mode reads it
    (:func:`jobsched.local.code_version.local_code_version`), else ``dev``."""
    return environ.get(ENV_CODE_VERSION, "").strip() or local_code_version(str(directory))


def record_forced(client: ApiClient, code_version: str, problems: Sequence[Problem]) -> Any:
    """Record that the deploy goes on despite ``problems`` (``POST /handlers/deploy-checks``)."""
    body = {"forced": True, "code_version": code_version, "problems": [p.describe() for p in problems]}
    return client.request("POST", DEPLOY_CHECKS_PATH, body=body)


def report(problems: Sequence[Problem], versions: int, deployed: str | None, *, forced: bool) -> str:
    """What people read: the verdict, then one line per problem."""
    against = f"the deployed code ({deployed})" if deployed else "the deployed system"
    if not problems:
        return (
            f"deploy-check: ok: the new code ({versions} handler versions) has every handler version "
            f"{against} still refers to"
        )
    lines = [f"deploy-check: the new code would strand what {against} still refers to:"]
    lines += [f"  - {problem.render()}" for problem in problems]
    if forced:
        lines.append("forced: going on; the check was recorded (GET /handlers/deploy-checks lists it)")
    else:
        lines.append(
            "refused: keep those handler versions in the code until they are drained "
            "(docs/handlers.md, 'Deploying new handler code'), or --force (recorded)"
        )
    return "\n".join(lines)
