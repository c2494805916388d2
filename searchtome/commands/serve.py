"""``python -m searchtome.commands.serve``: the local model server's own command line.

Not a ``searchtome`` subcommand: :func:`searchtome.llm.local.local_server` starts it as a child
process (``--endpoint local``), so it has a ``main`` instead of ``register``. The server itself
is :mod:`searchtome.llm.server`.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from searchtome.llm import server

    parser = argparse.ArgumentParser(
        prog="python -m searchtome.commands.serve",
        description=(server.__doc__ or "").split("\n")[0],
    )
    parser.add_argument("--model", required=True, help="a local Hugging Face model folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-batch", type=int, default=server.default_max_batch())
    parser.add_argument("--threads", type=int, default=server.default_threads())
    args = parser.parse_args(argv)
    server.serve(
        args.model,
        host=args.host,
        port=args.port,
        max_batch=args.max_batch,
        threads=args.threads,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
