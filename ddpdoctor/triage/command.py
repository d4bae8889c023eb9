"""`ddpdoctor explain` and `ddpdoctor env`: Args → run → exit code (the CLI parses the options).

Imported at every CLI start, so everything heavy (rich, psutil, the signature table) is
imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpdoctor.errors import EXIT_OK, EXIT_PROBLEMS, UsageError


@dataclass
class ExplainArgs:
    path: str = "-"
    json_path: str | None = None
    ascii_only: bool = False
    engine: str = "auto"
    max_bytes: int | None = None


def explain(args: ExplainArgs) -> int:
    """Explain a crash log or pasted ticket: the root cause, the evidence, why, and the fix."""
    import sys

    from ddpdoctor.report import schema
    from ddpdoctor.triage.matcher import explain_stream
    from ddpdoctor.triage.report import explain_doc

    path, json_path, engine, max_bytes = args.path, args.json_path, args.engine, args.max_bytes
    if engine not in ("auto", "grep", "python"):
        raise UsageError(f"--engine must be auto, grep or python, not {engine!r}")
    if max_bytes is not None and max_bytes < 1:
        raise UsageError(f"--max-bytes must be at least 1, not {max_bytes}")
    schema.check_writable(json_path)
    from ddpdoctor.flight import explain as flight_explain

    if path != "-" and flight_explain.wants(path):  # dumps or NCCL RAS text, not a log
        return flight_explain.explain(path, json_path, args.ascii_only)
    if path == "-":
        diagnosis = explain_stream(_stdin(), engine, max_bytes)
    else:
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below; errors become one line
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
        with fh:
            if not _is_readable_file(fh):
                raise UsageError(f"cannot read {path}: not a regular file")
            diagnosis = explain_stream(fh, engine, max_bytes)
    doc = explain_doc(diagnosis, path)
    code = EXIT_OK if doc["matches"] else EXIT_PROBLEMS
    if not doc["matches"]:
        print(doc["advice"], file=sys.stderr)
    if json_path:
        schema.write(doc, json_path)
        if json_path == "-":
            return code
    from ddpdoctor.triage import render

    render.explain(doc, render.console(args.ascii_only), args.ascii_only)
    return code


def _stdin():
    """stdin as a binary stream; a closed stdin (`explain <&-`) is a usage error, not a crash."""
    import os
    import sys

    stream = getattr(sys.stdin, "buffer", None)
    try:
        if stream is None:
            raise OSError
        os.fstat(stream.fileno())
    except (OSError, ValueError):
        raise UsageError("no input: stdin is closed; pass a FILE or pipe the log in") from None
    return stream


def _is_readable_file(fh) -> bool:
    import os
    import stat

    mode = os.fstat(fh.fileno()).st_mode
    return not stat.S_ISDIR(mode)


@dataclass
class EnvArgs:
    json_path: str | None = None
    markdown: bool = False
    ascii_only: bool = False


def env(args: EnvArgs) -> int:
    """A paste-safe snapshot of this node: versions, GPUs, CPU, /dev/shm, network, variables."""
    from ddpdoctor.node import envinfo
    from ddpdoctor.report import schema
    from ddpdoctor.triage.report import env_doc

    schema.check_writable(args.json_path)
    doc = env_doc(envinfo.snapshot(include_torch=True, resolve_hostname=True))
    if args.json_path:
        schema.write(doc, args.json_path)
        if args.json_path == "-":
            return EXIT_OK
    from ddpdoctor.triage import render

    if args.markdown:
        import sys

        sys.stdout.write(render.env_markdown(doc))
    else:
        render.env(doc, render.console(args.ascii_only), args.ascii_only)
    return EXIT_OK
