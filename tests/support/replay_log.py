"""A stand-in for vLLM where a real one cannot exist here (a GPU fault): prints a
recorded real log from fixtures/ and exits with the given code.

Usage: python -m tests.support.replay_log FIXTURE [EXIT_CODE] [-- ignored vllm args]
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    path, code = (
        Path(sys.argv[1]),
        int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].lstrip("-").isdigit() else 1,
    )
    sys.stdout.buffer.write(path.read_bytes())
    sys.stdout.flush()
    sys.exit(code)
