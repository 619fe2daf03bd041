"""llama.cpp's OpenAI-compatible server (xllamacpp, in this process) on a free loopback port.

Run as a script by `tests/llm/test_local_llamacpp.py`: it prints the listening address on one
line of stdout, then serves until its stdin closes, and shuts the server down (`~Server` stops
the HTTP thread and the main loop). A process of its own, so that a crash inside llama.cpp
fails the test instead of killing pytest, and killing it always frees the port.

    python tests/llm/llamacpp_server.py MODEL.gguf [--ctx N] [--threads N]
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # llama.cpp binds any free port; listening_address says which
    server = xllamacpp.Server(params)
    print(server.listening_address, flush=True)
    sys.stdin.read()  # until the test closes the pipe
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
