"""The Dockerfile: its build args, defaults and entrypoint are what README.md documents,
it installs everything the package needs, keeps the token out of build args, and
passes hadolint."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import pytest

from tests.support.vllm_env import ROOT

HADOLINT = ROOT / ".venv" / "bin" / "hadolint"


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    pairs = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        pairs.append((keyword.upper(), rest.strip()))
    return pairs


DOCKERFILE = _instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))


def _build_args() -> dict[str, str]:
    args = {}
    for keyword, rest in DOCKERFILE:
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default.strip('"')
    return args


def _readme_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Docker image\n", 1)[1]
    return section.split("\n## ", 1)[0]


def _readme_build_args() -> dict[str, str]:
    args = {}
    for match in re.finditer(r"^\| `([A-Z_]+)` \| ([^|]*) \|", _readme_section(), re.M):
        default = match.group(2).strip()
        args[match.group(1)] = "" if default == "(empty)" else default.strip("`")
    return args


def test_build_args_and_defaults_match_the_readme() -> None:
    assert _build_args() == _readme_build_args()


def test_the_documented_build_args() -> None:
    assert _build_args() == {
        "VLLM_VERSION": "v0.32.0",
        "MODEL_NAME": "",
        "MODEL_REVISION": "main",
        "TOKENIZER_NAME": "",
        "TOKENIZER_REVISION": "",
        "QUANTIZATION": "",
        "HF_ENDPOINT": "",
        "BASE_PATH": "/runpod-volume",
    }


def test_entrypoint_is_exec_form_and_matches_the_readme() -> None:
    (entrypoint,) = [rest for keyword, rest in DOCKERFILE if keyword == "ENTRYPOINT"]
    argv = json.loads(entrypoint)  # exec form: a JSON list, so the base image's is replaced
    assert argv == ["/opt/worker/bin/python", "-m", "worker"]
    assert f"entrypoint is\n`{' '.join(argv)}`" in _readme_section()


def test_builds_on_the_vllm_image_and_leaves_vllm_command_alone() -> None:
    (base,) = [rest for keyword, rest in DOCKERFILE if keyword == "FROM"]
    assert base == "vllm/vllm-openai:${VLLM_VERSION}"
    assert not any("VLLM_COMMAND" in rest for keyword, rest in DOCKERFILE if keyword == "ENV")


def test_the_worker_gets_its_own_venv() -> None:
    runs = [rest for keyword, rest in DOCKERFILE if keyword == "RUN"]
    assert any("python3 -m venv /opt/worker" in run for run in runs)
    pip_runs = [run for run in runs if "pip install" in run]
    assert pip_runs and all("/opt/worker/bin/pip install" in run for run in pip_runs)


def test_everything_the_package_needs_is_copied() -> None:
    copied = set()
    for keyword, rest in DOCKERFILE:
        if keyword == "COPY":
            *sources, _dest = rest.split()
            copied |= {source.rstrip("/") for source in sources if not source.startswith("--")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    # setup.py finds the packages under worker/ and diagnostics/.
    needed = {"pyproject.toml", "setup.py", project["project"]["readme"], "worker", "diagnostics"}
    needed |= set(setuptools["package-dir"].values())
    assert needed <= copied


def test_the_token_is_a_secret_never_a_build_arg_or_env() -> None:
    assert not any("HF_TOKEN" in rest for keyword, rest in DOCKERFILE if keyword in ("ARG", "ENV"))
    (bake,) = [
        rest for keyword, rest in DOCKERFILE if keyword == "RUN" and "worker.image.bake" in rest
    ]
    assert bake.startswith("--mount=type=secret,id=HF_TOKEN ")
    assert "--target /model" in bake  # where settings.DEFAULT_MANIFEST expects baked.json
    assert "--secret id=HF_TOKEN,env=HF_TOKEN" in _readme_section()


def test_caches_live_under_base_path() -> None:
    env = " ".join(rest for keyword, rest in DOCKERFILE if keyword == "ENV")
    assert "HF_HOME=${BASE_PATH}/huggingface-cache" in env
    assert "VLLM_CACHE_ROOT=${BASE_PATH}/vllm-cache" in env


@pytest.mark.skipif(not HADOLINT.exists(), reason=f"hadolint not installed at {HADOLINT}")
def test_hadolint_passes() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--no-color", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_ignores_carry_a_reason() -> None:
    lines = (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# hadolint ignore="):
            reason = lines[i - 1]
            assert reason.startswith("# ") and "hadolint ignore" not in reason, (
                f"Dockerfile line {i + 1}: say why on the line above the ignore"
            )


def test_no_syntax_directive() -> None:
    # `# syntax=...` makes every build pull a frontend image first; BuildKit's built-in
    # frontend runs RUN --mount=type=secret, so the build needs nothing but the base image.
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert not re.search(r"^#\s*syntax\s*=", text, re.M | re.I)


def test_the_readme_points_to_the_image_test() -> None:
    assert "./scripts/test-image" in _readme_section()
    assert "./scripts/test-image" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_hf_endpoint_can_come_in_as_a_build_secret() -> None:
    # A build arg used in a RUN step is recorded in the image history: a mirror URL with
    # credentials must be able to come in as a secret, as the token does.
    (bake_run,) = [
        rest for keyword, rest in DOCKERFILE if keyword == "RUN" and "worker.image.bake" in rest
    ]
    assert "--mount=type=secret,id=HF_ENDPOINT" in bake_run
    assert "--mount=type=secret,id=HF_TOKEN" in bake_run
    assert "--secret id=HF_ENDPOINT,env=HF_ENDPOINT" in _readme_section()
    assert "recorded in its history" in _readme_section()
