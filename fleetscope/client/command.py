"""What every client command shares: the connection flags, building the Api from them (flags >
environment > config file), and turning a ClientError into its one-line message and exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from fleetscope.client.config import Flags, resolve
from fleetscope.client.errors import BadInput, ClientError
from fleetscope.client.transport import Api


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "connection (flags > FLEETSCOPE_SERVER/FLEETSCOPE_TOKEN > context)"
    )
    g.add_argument(
        "--config",
        help="config file (default: $FLEETSCOPE_CONFIG, else ~/.config/fleetscope/config.yaml)",
    )
    g.add_argument("--context", help="the context of the config file to use")
    g.add_argument("--server", help="the fleetscope API URL, e.g. https://fleetscope.example.com")
    g.add_argument("--certificate-authority", metavar="FILE", help="CA bundle for the server")
    g.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not check the server's certificate (insecure)",
    )
    g.add_argument(
        "--as",
        dest="as_user",
        metavar="USER",
        help="debugging aid: send X-Remote-User (servers in `header` identity mode "
        "that trust this address only, such as `fleetscope demo`)",
    )
    g.add_argument(
        "--as-group",
        dest="as_groups",
        action="append",
        default=[],
        metavar="GROUP",
        help="with --as: send this group in X-Remote-Group (repeatable)",
    )
    g.add_argument(
        "--request-timeout",
        default="30s",
        metavar="DURATION",
        help="per request: 30s, 2m, 0 for none (default 30s)",
    )
    g.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=int,
        default=0,
        metavar="LEVEL",
        help="log requests to stderr: 6 = URL, status, time; 8 = headers (token masked)",
    )


def connect(args: argparse.Namespace) -> Api:
    if args.as_groups and not args.as_user:
        raise BadInput("--as-group needs --as")
    flags = Flags(
        config=args.config,
        context=args.context,
        server=args.server,
        certificate_authority=args.certificate_authority,
        insecure_skip_tls_verify=args.insecure_skip_tls_verify,
        as_user=args.as_user,
        as_groups=tuple(args.as_groups),
    )
    target = resolve(flags, os.environ)
    return Api(target, parse_duration(args.request_timeout), args.verbosity)


def parse_duration(text: str) -> float:
    """`30`, `30s`, `2m`, `1h` as seconds; 0 means no limit."""
    units = {"s": 1, "m": 60, "h": 3600}
    raw = text.strip()
    scale = units.get(raw[-1:], 1) if raw else 1
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        value = float(number) * scale
    except ValueError:
        raise BadInput(f"--request-timeout {text!r} is not a duration like 30s or 2m") from None
    if value < 0:
        raise BadInput("--request-timeout must not be negative")
    return value


def run_command(body: Callable[[], int]) -> int:
    """Run a command: a ClientError becomes `error: ...` on stderr and its exit code."""
    try:
        return body()
    except ClientError as e:
        sys.stdout.flush()
        print(e.line(), file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        # The reader (`| head`) stopped: not an error. Point stdout at /dev/null so the
        # interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
