"""A stand-in for vLLM whose output is a flood: N ordinary log lines as fast as it can,
some 1 MB lines, some invalid UTF-8; then a real failure line; then it exits 1.

Usage: python -m tests.support.flood N
"""

import sys

if __name__ == "__main__":
    count = int(sys.argv[1])
    out = sys.stdout.buffer
    line = b"(EngineCore pid=7) INFO 11-29 17:19:50 [core.py:1] scheduler step %d: 0 running, 0 waiting, kv 0.0%%\n"
    big = b"(APIServer pid=1) INFO 11-29 17:19:50 [x.py:1] " + b"x" * (1 << 20) + b"\n"
    junk = b"\xff\xfe\xc3(\xa0\xa1 not utf-8 \xe2\x82\n"
    chunk = []
    for n in range(count):
        chunk.append(line % n)
        if n % max(count // 20, 1) == 0:  # 20 lines of 1 MB, whatever the count
            chunk += [big, junk]
        if len(chunk) >= 2000:
            out.write(b"".join(chunk))
            chunk = []
    out.write(b"".join(chunk))
    out.write(b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    out.flush()
    sys.exit(1)
