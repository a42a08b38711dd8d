"""``evalport run PATH``: discover cases, run them against a target, write every report.
Selecting no case is a usage error, and with ``--json -`` nothing else goes to stdout.
See ARCHITECTURE.md, "evalport run".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import msgspec
from evalport.client import RunCache, Runner, RunOptions, traced_trials
from evalport.protocol._extras import MissingExtraError, require

from .._core import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    TRACE_POLICIES,
    ConfigError,
    LoggedConversations,
    Settings,
    fail,
    load_settings,
    open_cache_store,
    parse_shard,
    select,
)
from ..reports import (
    ConsoleReporter,
    HtmlReporter,
    JsonReporter,
    JUnitReporter,
    MarkdownReporter,
    RunFolderReporter,
    compare,
    load_reporter,
    load_summary,
)
from ._logs import agent_logs
from ._project import CONFIG_BOOTSTRAP, Factory, load_factory, run_bootstrap
from ._targets import (
    CONFIG_LOCAL,
    CONFIG_TOKEN_ENV,
    PreparedTarget,
    TargetUnreachable,
    add_server_options,
    build_judge,
    build_target,
    without_credentials,
)

HELP = "run eval cases against a target"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("path", nargs="?", metavar="PATH", help="eval file or folder (default from config)")
    add("--path", dest="path_option", metavar="PATH", help="the same as PATH (Neuron's spelling)")
    add(
        "--bootstrap",
        metavar="MODULE",
        help="a module or file.py imported once before the eval files load",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--target", metavar="URL", help="base URL of the agent's eval protocol")
    where.add_argument("--local", metavar="TARGET", help="in-process agent: module:attr")
    add("--tag", dest="tags", action="append", metavar="T", help="run cases with tag T")
    add("--exclude-tag", dest="exclude_tags", action="append", metavar="T", help="skip tag T")
    add(
        "-k", dest="keyword", metavar="EXPR", help="select cases by id words: 'refund and not slow'"
    )
    add("--repeat", type=int, metavar="N", help="trials per case (default 1)")
    add("--pass-rate", type=float, metavar="R", help="share of trials that must pass (default 1)")
    add("--min-lower-bound", type=float, metavar="L", help="fail cases whose Wilson low bound < L")
    add("--concurrency", type=int, metavar="N", help="trials in flight at once (default 8)")
    add("--rps", type=float, metavar="R", help="at most R requests per second to the target")
    add("--timeout", type=float, metavar="S", help="seconds per trial (default 120)")
    add_server_options(add, connect_default=None)  # None: as [tool.evalport] says
    add(
        "--trace-policy",
        choices=TRACE_POLICIES,
        help="safe: tool payloads and error texts digested (default); verbatim: all in clear",
    )
    add(
        "--otlp",
        metavar="URL",
        help="export each trial as an OpenTelemetry trace to this OTLP/HTTP collector "
        "(default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    add("--strict", action="store_true", default=None, help="a scored case fails the run")
    add("--cache", action="store_true", default=None, help="replay recorded turns when unchanged")
    add("--fresh", action="store_true", default=None, help="record again, read no recording")
    add("--cache-dir", metavar="DIR", help="where recordings live (default .evalport/cache)")
    add(
        "--cache-store",
        metavar="URL",
        help="keep recordings in Redis (redis://HOST:6379/0) or a module:Name store",
    )
    add("--attach", metavar="SESSION_ID", help="evaluate an existing session instead")
    add("--out", metavar="DIR", help="run folder (default .evalport/runs/<time>)")
    add("--json", metavar="F", help="write the results summary as JSON ('-': to stdout)")
    add("--junit", metavar="F", help="write JUnit XML")
    add("--md", metavar="F", help="write a Markdown summary ($GITHUB_STEP_SUMMARY)")
    add("--html", metavar="F", help="write a self-contained HTML report")
    add("--baseline", metavar="F", help="compare with an earlier --json file or run folder")
    add("--shard", metavar="I/N", help="run the I-th of N shards of the cases")
    add("--list", action="store_true", help="list the selected cases and exit")
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more in the console: each trial's assertions, the transcript of trials that "
        "did not pass, the judges' reasons and evidence, why recordings were not reused",
    )
    loud.add_argument("-q", "--quiet", action="store_true", help="print only the closing summary")
    add("--config", metavar="PYPROJECT", help="read [tool.evalport] from this file")


def resolve_settings(args: argparse.Namespace) -> Settings:
    """Configuration file values, overridden by the options given explicitly."""
    if args.path_option:
        if args.path and args.path != args.path_option:
            raise ConfigError(
                f"give the path once: PATH {args.path!r} or --path {args.path_option!r}"
            )
        args.path = args.path_option
    start = Path(args.path) if args.path else Path.cwd()
    file = Path(args.config) if args.config else None
    settings = load_settings(start if start.exists() else Path.cwd(), file=file)
    if args.target or args.local:  # the command line names the target: config's is replaced
        settings.target = settings.local = None
    for field in msgspec.structs.fields(Settings):  # each option named like a setting
        value = getattr(args, field.name, None)
        if value is not None:
            setattr(settings, field.name, value)
    return settings.validate("command line")


def _named(args: argparse.Namespace) -> dict[str, str]:
    """Where the user wrote the target's settings: the option, else the config key."""
    return {
        "local": "--local" if args.local else CONFIG_LOCAL,
        "token-env": "--token-env" if args.token_env else CONFIG_TOKEN_ENV,
    }


def _discover(path: str, factory: Factory | None) -> tuple[list[Any], list[str]]:
    from evalport.client import DuplicateCaseError, discover

    if not Path(path).exists():
        raise ConfigError(f"{path}: no such file or folder")
    try:
        cases, errors = discover(path, factory=factory)
    except DuplicateCaseError as error:
        raise ConfigError(str(error)) from None
    return list(cases), [str(error) for error in errors]


def _reporters(
    settings: Settings, out: Path, args: argparse.Namespace, stdout: TextIO
) -> list[object]:
    console = ConsoleReporter(verbose=args.verbose > 0, quiet=args.quiet)
    reporters: list[object] = [console, RunFolderReporter(out)]
    baseline = load_summary(settings.baseline) if settings.baseline else None
    if settings.json == "-":
        reporters.append(JsonReporter(stream=stdout))
    elif settings.json:
        reporters.append(JsonReporter(settings.json))
    if settings.junit:
        reporters.append(JUnitReporter(settings.junit))
    if settings.md:
        reporters.append(MarkdownReporter(settings.md, baseline=baseline))
    if settings.html:
        reporters.append(HtmlReporter(settings.html))
    factory = load_factory(settings.factory) if settings.factory else None
    reporters += [load_reporter(spec, factory) for spec in settings.reporters]
    return reporters


def _out_folder(settings: Settings) -> Path:
    if settings.out:
        return Path(settings.out)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(".evalport") / "runs" / f"{stamp}-{os.getpid()}"


async def _run(
    args: argparse.Namespace,
    settings: Settings,
    cases: list[Any],
    errors: list[str],
    stdout: TextIO,
) -> int:
    out = _out_folder(settings)
    reporters = _reporters(settings, out, args, stdout)
    options = RunOptions(
        repeat=settings.repeat,
        pass_rate=settings.pass_rate,
        concurrency=settings.concurrency,
        rps=settings.rps,
        timeout=settings.timeout,
        strict=settings.strict,
        min_lower_bound=settings.min_lower_bound,
        attach=args.attach,
        shard=args.shard,
        command=["evalport", "run", *(without_credentials(arg) for arg in sys.argv[2:])],
    )
    try:
        tracing = _tracing(args.otlp)
    except MissingExtraError as error:
        return fail("run", str(error), EXIT_USAGE)
    except ValueError as error:
        return fail("run", f"--otlp: {error}", EXIT_USAGE)
    cache: RunCache | None = None
    target: PreparedTarget | None = None
    judge = None
    try:  # whatever was opened is closed on every way out, a configuration error too
        cache = _cache(settings)
        target = (
            build_target(settings, named=_named(args))
            if settings.target or settings.local
            else PreparedTarget(LoggedConversations(policy=settings.policy()))
        )
        try:
            await target.prepare()
        except TargetUnreachable as error:
            return fail("run", str(error), EXIT_UNREACHABLE)
        unnoticed = cache.unnoticed(target.target.identity) if cache is not None else None
        if unnoticed is not None:
            print(f"evalport run: warning: {unnoticed}", file=sys.stderr)
        judge = build_judge(settings)
        runner = Runner(
            target.target,
            options,
            judge=judge,
            cache=cache,
            reporters=reporters,
            trial_function=traced_trials(tracing) if tracing else None,
        )
        report = await runner.run(cases, load_errors=errors)
    finally:
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)  # the SDK sends the spans still queued
        if target is not None:
            await target.aclose()
        if cache is not None:
            await cache.aclose()
        aclose = getattr(judge, "aclose", None)
        if aclose is not None:
            await aclose()
    for problem in [*runner.reporters.errors, *(cache.errors if cache else [])]:
        print(f"evalport run: warning: {problem}", file=sys.stderr)
    if cache is not None and not args.quiet:
        logged = {case.id for case in cases if getattr(case, "conversation", None) is not None}
        read = sum(len(result.trials) for result in report.results if result.case_id in logged)
        replayed, trials = report.summary.cached_trials, report.summary.trials - read
        _cache_lines(cache, replayed, trials, read, args.verbose > 0)
    if settings.baseline:
        print("\n".join(compare(load_summary(settings.baseline), report.summary).lines()))
    if not args.quiet:
        print(f"run folder: {out}")
    return EXIT_OK if report.summary.ok else EXIT_FAILED


def _cache(settings: Settings) -> RunCache | None:
    """The run cache ``--cache`` asks for, in ``--cache-dir`` or the ``--cache-store``."""
    if not settings.cache:
        return None
    store: Any = settings.cache_dir
    if settings.cache_store:
        try:
            store = open_cache_store(settings.cache_store)
        except ValueError as error:
            raise ConfigError(
                f"--cache-store (cache-store): {error}; or drop it to keep recordings in "
                "--cache-dir"
            ) from None
    return RunCache(store, fresh=settings.fresh, dependencies=settings.cache_dependencies)


_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _tracing(url: str | None) -> Any:
    """The SDK ``TracerProvider`` that ``--otlp URL`` or a standard endpoint variable asks
    for, or ``None``. Without the ``otel`` extra, ``--otlp`` is a usage error; a variable
    alone is one line on stderr, and the run goes on untraced."""
    variable = next((name for name in _ENDPOINTS if os.environ.get(name)), None)
    if not url and variable is None:
        return None
    try:
        tracing = require("evalport.protocol.tracing", "otel", "--otlp" if url else f"${variable}")
    except MissingExtraError as error:
        if url:
            raise
        # A variable set for other programs of the environment does not stop the run.
        print(f"evalport run: not tracing: {error}", file=sys.stderr)
        return None
    return tracing.otlp_provider(url or None, "evalport")


def _cache_lines(cache: RunCache, replayed: int, trials: int, read: int, verbose: bool) -> None:
    """How many trials the run cache answered (of those that went through it: ``read``
    trials read logged conversations instead); with ``-v``, why the others were not."""
    hint = "" if verbose or not cache.misses else " (-v says why the others were not)"
    files = f"; {read} read logged conversation files, which are never cached" if read else ""
    counted = f"{replayed} of {trials} trials replayed" if trials or not read else "no trial"
    print(f"run cache: {counted}{files}{hint}")
    if verbose:
        for line in cache.misses:
            print(f"  not replayed: {line}")


def _no_case(path: str, found: int) -> str:
    """Why nothing runs: the selection left nothing, the files declare no case, or there
    are no eval files."""
    from evalport.client import eval_files

    if found:
        return (
            f"no case to run: --tag, --exclude-tag or -k left out all {found} case(s) under {path}"
        )
    files = eval_files(Path(path))
    if files:
        named = ", ".join(str(file) for file in files[:3]) + (" ..." if len(files) > 3 else "")
        verb = "declares" if len(files) == 1 else "declare"
        return (
            f"no case to run: {named} {verb} no case; decorate each case function with "
            "@eval_case (from evalport.client import eval_case), or subclass Evaluator"
        )
    return f"no case to run under {path}: eval files are named *_eval.py or eval_*.py"


def main(args: argparse.Namespace) -> int:
    try:
        settings = resolve_settings(args)
        if not settings.path:
            return fail("run", "give a PATH to the eval files (or path = ... in [tool.evalport])")
        shard = parse_shard(args.shard) if args.shard else None
        if settings.bootstrap:
            run_bootstrap(settings.bootstrap, "--bootstrap" if args.bootstrap else CONFIG_BOOTSTRAP)
        factory = load_factory(settings.factory) if settings.factory else None
        cases, errors = _discover(settings.path, factory)
        found = len(cases)
        cases = select(
            cases,
            tags=settings.tags,
            exclude_tags=settings.exclude_tags,
            keyword=settings.keyword,
            shard=shard,
        )
        if args.list:
            for case in cases:
                print(case.id)
            for error in errors:
                print(f"load error: {error}", file=sys.stderr)
            return EXIT_FAILED if errors else EXIT_OK
        if not cases and not errors and shard is None:
            return fail("run", _no_case(settings.path, found))
        logged = bool(cases) and all(case.conversation is not None for case in cases)
        if not settings.target and not settings.local and not logged:
            return fail("run", "give --target URL or --local module:attr (or set one in config)")
        if args.attach and settings.local:
            return fail(
                "run",
                "--attach needs --target URL: a --local agent's sessions live only in the "
                "process that opened them",
            )
        if args.attach and settings.repeat > 1:
            return fail(
                "run",
                f"--attach evaluates the one conversation of that session: --repeat "
                f"{settings.repeat} would run later trials on what earlier ones sent; drop it",
            )
        stdout = sys.stdout
        with (
            agent_logs(sys.stderr),
            redirect_stdout(sys.stderr if settings.json == "-" else stdout),
        ):
            return asyncio.run(_run(args, settings, cases, errors, stdout))
    except ConfigError as error:
        return fail("run", str(error), EXIT_USAGE)
    except KeyboardInterrupt:
        return fail("run", "interrupted; open sessions were closed", EXIT_INTERRUPTED)
