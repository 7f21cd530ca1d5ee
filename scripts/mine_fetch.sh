#!/usr/bin/env bash
# Fetch the sources scripts/mine_catalogue.py reads: every release of vLLM (0.1.7, then
# 0.2.0 on, patch releases included), of transformers (4.33.0 on) and huggingface_hub
# (0.16.4 on) -- the range vLLM's releases pin -- one wheel at a time: download into
# $DL, unzip only Python sources into $SRC/<project>-<version>/ (vLLM's package without
# its tests; of transformers only the folders the miner reads), delete the wheel. Plus
# the native library the miner reads (torch's libc10_cuda) and ray's errors.
#
#   nohup scripts/mine_fetch.sh /tmp/catmine > /tmp/catmine/fetch.log 2>&1 &
#
# Re-runnable: a release whose folder exists is skipped. Run one instance at a time (a
# second one sharing $SRC may unpack the same release twice).
set -u
BASE=${1:-/tmp/catmine}
DL=$BASE/dl; SRC=$BASE/src
PIP=${PIP:-$(dirname "$0")/../.venv/bin/pip}
mkdir -p "$DL" "$SRC"
export PIP_CONSTRAINT=
PLATFORMS="--platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64 --platform any"

versions() {  # project, minimum version: every release on the index from it on
  "$PIP" index versions "$1" 2>/dev/null | sed -n 's/^Available versions: //p' | tr ',' '\n' \
    | tr -d ' ' | grep -v '+' | python3 -c "
import re, sys
key = lambda v: tuple(int(p) if p.isdigit() else -1 for p in re.split(r'[.]|(?<=\d)(?=post)', v))
low = key('$2')
vs = [v for v in sys.stdin.read().split() if re.fullmatch(r'\d+(\.\d+)*(\.post\d+)?', v) and key(v) >= low]
print('\n'.join(sorted(vs, key=key)))"
}

fetch() {  # project, version, unzip patterns...
  local project=$1 version=$2; shift 2
  local dest="$SRC/$project-$version"
  [ -d "$dest" ] && return 0
  rm -f "$DL"/*.whl
  local ok=
  for py in 3.12 3.10 3.11 3.9 3.8; do
    if "$PIP" download -q --no-deps --only-binary=:all: $PLATFORMS --python-version $py \
        "$project==$version" -d "$DL" >/dev/null 2>&1; then ok=1; break; fi
  done
  if [ -z "$ok" ]; then echo "FAIL $project $version"; return 1; fi
  local whl; whl=$(ls "$DL"/*.whl | head -1)
  mkdir -p "$dest.part"
  unzip -q -o -W "$whl" "$@" -x '**/tests/**' -d "$dest.part" >/dev/null 2>&1
  mv "$dest.part" "$dest"
  echo "OK $project $version $(du -s "$whl" | cut -f1)K -> $(du -s "$dest" | cut -f1)K  $(df -h "$BASE" | awk 'NR==2{print $4}') free"
  rm -f "$whl"
}

for v in 0.1.7 $(versions vllm 0.2.0); do fetch vllm "$v" 'vllm/**.py'; done
for v in $(versions huggingface_hub 0.16.4); do fetch huggingface_hub "$v" 'huggingface_hub/**.py'; done
for v in $(versions transformers 4.33.0); do
  fetch transformers "$v" 'transformers/*.py' 'transformers/utils/*.py' 'transformers/models/auto/*.py' \
    'transformers/models/llama/*.py'
done
for v in 2.1.2 2.5.1 2.9.0; do
  fetch torch "$v" 'torch/cuda/*.py' 'torch/lib/libc10_cuda.so'
done
fetch ray 2.40.0 'ray/exceptions.py' 'ray/_private/memory_monitor.py'
echo DONE
