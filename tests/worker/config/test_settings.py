"""worker.config.settings: one frozen Settings from the environment; bad values name the variable."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest

from tests.support.vllm_env import ROOT
from worker.config import baked
from worker.config import settings as settings_mod
from worker.config.errors import ConfigError
from worker.config.flags import ALIASES
from worker.config.owned import HIDDEN_ENV
from worker.config.settings import SETTINGS, WORKER_ENV, Settings, fallback_settings, load_settings

MODEL = {"MODEL_NAME": "org/model"}


@pytest.fixture(autouse=True)
def no_baked_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run the same whether or not this machine has a /model/baked.json."""
    monkeypatch.setattr(baked, "DEFAULT_MANIFEST", str(tmp_path / "absent.json"))


def test_defaults() -> None:
    s = load_settings(MODEL)
    assert s == Settings(
        vllm_command=["vllm", "serve"],
        vllm_port=8000,
        startup_timeout_s=3600.0,
        stall_timeout_s=600.0,
        max_concurrency=30,
        request_timeout_s=600.0,
        base_path=Path("/runpod-volume"),
        transient_answer_timeout_s=30.0,
        shutdown_grace_s=10.0,
        vllm_args=["--model", "org/model"],
        warnings=[],
        model="org/model",
        served_model_name="org/model",
        baked_model_path=None,
        offline=False,
    )


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        load_settings(MODEL).vllm_port = 1  # type: ignore[misc]


def test_values_are_read() -> None:
    s = load_settings(
        {
            **MODEL,
            "VLLM_COMMAND": "python -m 'vllm.entrypoints.cli.main' serve",
            "VLLM_PORT": "8123",
            "VLLM_STARTUP_TIMEOUT": "7200",
            "VLLM_STALL_TIMEOUT": "90.5",
            "MAX_CONCURRENCY": "4",
            "REQUEST_TIMEOUT": "30",
            "BASE_PATH": "/data",
            "TRANSIENT_ANSWER_TIMEOUT": "0",
            "VLLM_SHUTDOWN_GRACE": "2",
            "OPENAI_SERVED_MODEL_NAME_OVERRIDE": "my-model",
            "MAX_MODEL_LEN": "8192",
        }
    )
    assert s.vllm_command == ["python", "-m", "vllm.entrypoints.cli.main", "serve"]
    assert (s.vllm_port, s.max_concurrency) == (8123, 4)
    assert (s.startup_timeout_s, s.stall_timeout_s, s.request_timeout_s) == (7200, 90.5, 30)
    assert (s.transient_answer_timeout_s, s.shutdown_grace_s) == (0, 2)
    assert s.base_path == Path("/data")
    assert s.served_model_name == "my-model"
    assert s.vllm_args == [
        "--model", "org/model", "--max-model-len", "8192", "--served-model-name", "my-model"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("VLLM_PORT", "eighty"),
        ("VLLM_PORT", "0"),
        ("VLLM_PORT", "70000"),
        ("VLLM_STARTUP_TIMEOUT", "1h"),
        ("VLLM_STARTUP_TIMEOUT", "0"),
        ("VLLM_STALL_TIMEOUT", "-5"),
        ("VLLM_STALL_TIMEOUT", "nan"),
        ("REQUEST_TIMEOUT", "inf"),
        ("MAX_CONCURRENCY", "0"),
        ("MAX_CONCURRENCY", "2.5"),
        ("TRANSIENT_ANSWER_TIMEOUT", "-1"),
        ("VLLM_SHUTDOWN_GRACE", "soon"),
        ("VLLM_COMMAND", "'unclosed"),
        ("ENFORCE_EAGER", "maybe"),
        ("MAX_MODEL_LEN", "lots"),
    ],
)
def test_bad_values_name_the_variable(var: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**MODEL, var: value})
    assert info.value.var == var


def test_empty_values_mean_default() -> None:
    s = load_settings({**MODEL, "VLLM_PORT": "", "MAX_CONCURRENCY": "  "})
    assert (s.vllm_port, s.max_concurrency) == (8000, 30)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"MODEL_NAME": "  "},
        {"SERVED_MODEL_NAME": "x", "MAX_MODEL_LEN": "4096"},
    ],
)
def test_no_model_names_model_name(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert info.value.var == "MODEL_NAME"


@pytest.mark.parametrize(
    "env",
    [
        {"MODEL": "org/model"},
        {"VLLM_EXTRA_ARGS": "--model org/model"},
    ],
)
def test_model_from_other_places(env: dict[str, str]) -> None:
    assert load_settings(env).model == "org/model"


def test_model_from_config_file(tmp_path: Path) -> None:
    config = tmp_path / "vllm.yaml"
    config.write_text("model: org/from-config\nserved-model-name: [alpha, beta]\n")
    s = load_settings({"VLLM_CONFIG_FILE": str(config)})
    assert (s.model, s.served_model_name) == ("org/from-config", "alpha")
    assert s.vllm_args == ["--config", str(config)]


def test_unreadable_config_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**MODEL, "VLLM_CONFIG_FILE": str(tmp_path / "missing.yaml")})
    assert info.value.var == "VLLM_CONFIG_FILE"


def test_secrets_stay_out_of_settings_messages() -> None:
    secret = "hf_abcdefghijklmnopqrstuvwx"
    s = load_settings({**MODEL, "HF_TOKEN": secret, "API_KEY": secret})
    assert secret not in repr(s)
    with pytest.raises(ConfigError) as info:
        load_settings({"HF_TOKEN": secret, "MAX_NUM_BATCHED_TOKENS": secret})
    assert secret not in str(info.value)


def _bake(tmp_path: Path, tokenizer: bool = False, **extra: object) -> Path:
    model_dir = tmp_path / "weights"
    model_dir.mkdir()
    manifest = {
        "model_path": str(model_dir),
        "tokenizer_path": str(model_dir) if tokenizer else None,
        "model_name": "org/baked",
        **extra,
    }
    path = tmp_path / "baked.json"
    path.write_text(json.dumps(manifest))
    return path


def test_baked_model_wins_over_model_name(tmp_path: Path) -> None:
    manifest = _bake(tmp_path)
    s = load_settings(
        {"BAKED_MODEL_MANIFEST": str(manifest), "MODEL_NAME": "org/other", "MODEL_REVISION": "x"}
    )
    weights = str(tmp_path / "weights")
    assert s.vllm_args == ["--model", weights, "--served-model-name", "org/baked"]
    assert (s.model, s.served_model_name) == (weights, "org/baked")
    assert s.baked_model_path == Path(weights)
    assert s.offline is True
    assert sorted(w.split()[0] for w in s.warnings) == ["MODEL_NAME", "MODEL_REVISION"]


def test_baked_model_at_the_default_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(baked, "DEFAULT_MANIFEST", str(_bake(tmp_path, tokenizer=True)))
    s = load_settings({"MODEL_NAME": "org/baked", "TOKENIZER_NAME": "org/tok"})
    weights = str(tmp_path / "weights")
    assert s.vllm_args == [
        "--model", weights, "--served-model-name", "org/baked", "--tokenizer", weights
    ]  # fmt: skip
    # Naming the baked model is not worth a warning; replacing the tokenizer is.
    assert [w.split()[0] for w in s.warnings] == ["TOKENIZER_NAME"]


def test_baked_model_keeps_a_user_served_name(tmp_path: Path) -> None:
    manifest = _bake(tmp_path)
    s = load_settings({"BAKED_MODEL_MANIFEST": str(manifest), "SERVED_MODEL_NAME": "mine"})
    assert s.served_model_name == "mine"


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        json.dumps({"model_path": "", "model_name": "x"}),
        json.dumps({"model_path": "/nonexistent/weights", "model_name": "x"}),
        json.dumps({"model_path": "{weights}", "model_name": 3}),
        json.dumps({"model_path": "{weights}", "model_name": "x", "tokenizer_path": 5}),
    ],
)
def test_bad_manifest_names_its_variable(tmp_path: Path, content: str) -> None:
    (tmp_path / "weights").mkdir()
    path = tmp_path / "baked.json"
    path.write_text(content.replace("{weights}", str(tmp_path / "weights")))
    with pytest.raises(ConfigError) as info:
        load_settings({"BAKED_MODEL_MANIFEST": str(path)})
    assert info.value.var == "BAKED_MODEL_MANIFEST"


def test_explicit_manifest_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**MODEL, "BAKED_MODEL_MANIFEST": str(tmp_path / "nope.json")})
    assert info.value.var == "BAKED_MODEL_MANIFEST"


def _documented_defaults() -> dict[str, str]:
    """variable -> default cell, read from the worker table in docs/configuration.md."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = text.split("<!-- generated:worker -->", 1)[1].split("<!-- end:worker -->", 1)[0]
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| (`[^`]*`|) \|", table, re.MULTILINE)
    return {name: cell.strip("`") for name, cell in rows}


def test_the_documented_default_is_the_parsed_default() -> None:
    documented = _documented_defaults()
    assert set(documented) == WORKER_ENV
    loaded = load_settings(MODEL)
    fields = [s for s in SETTINGS if s.field is not None]
    assert fields
    for setting in fields:
        parsed = setting.parse(setting.name, documented[setting.name])
        assert getattr(loaded, setting.field) == parsed, setting.name


def test_every_setting_is_documented_and_reserved() -> None:
    assert all(s.doc for s in SETTINGS)
    assert {s.name for s in SETTINGS} == WORKER_ENV
    assert not WORKER_ENV & set(ALIASES)
    fields = {f.name for f in dataclasses.fields(Settings)}
    assert {s.field for s in SETTINGS if s.field} <= fields


def test_settings_reads_no_variable_outside_the_table() -> None:
    """No string literal that looks like a variable name is read in settings.py but the
    table's (the old code kept names in four places)."""
    source = Path(settings_mod.__file__).read_text()
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("get", "read")
    ]
    read = {
        arg.value
        for call in calls
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.isupper()
    }
    assert read <= WORKER_ENV


# Modules that own a variable the table documents and read it themselves (field None).
_OWN_READERS = {"flags.py": {"VLLM_EXTRA_ARGS"}}


def test_no_module_reads_a_worker_variable_around_the_table() -> None:
    """RULES_PATH and RUNPOD_WEBHOOK_GET_JOB were read beside Settings: every worker
    variable goes through the table (``load_settings`` or ``settings.read``)."""
    worker = Path(settings_mod.__file__).parents[1]
    found = []
    for path in sorted(worker.rglob("*.py")):
        if path.name == "settings.py":
            continue
        allowed = _OWN_READERS.get(path.name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            key = None
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get":
                key = node.args[0] if node.args else None
            elif isinstance(node, ast.Subscript):
                key = node.slice
            if isinstance(key, ast.Constant) and key.value in WORKER_ENV - allowed:
                found.append(f"{path.relative_to(worker)}:{node.lineno} {key.value}")
    assert found == []


@pytest.mark.parametrize(
    "var",
    [s.name for s in SETTINGS if s.field and s.parse.__qualname__.startswith("seconds")],
)
@pytest.mark.parametrize("value", ["1e10", "604801", "1e309"])
def test_every_duration_is_bounded(var: str, value: str) -> None:
    """TRANSIENT_ANSWER_TIMEOUT=1e10 raised OverflowError in the timer thread."""
    with pytest.raises(ConfigError) as info:
        load_settings({**MODEL, var: value})
    assert info.value.var == var
    assert "a week" in info.value.message


def test_a_week_is_allowed() -> None:
    assert load_settings({**MODEL, "VLLM_STARTUP_TIMEOUT": "604800"}).startup_timeout_s == 604800


@pytest.mark.parametrize("value", ["８０００", "٨٠٠٠", "8_000", "+8000 x"])
def test_ports_are_ascii_digits(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**MODEL, "VLLM_PORT": value})
    assert info.value.var == "VLLM_PORT"


def test_full_width_digits_are_no_concurrency() -> None:
    with pytest.raises(ConfigError):
        load_settings({**MODEL, "MAX_CONCURRENCY": "３０"})


def test_rules_path_and_job_queue_are_settings(tmp_path: Path) -> None:
    (tmp_path / "10-x.yaml").write_text("rules: []\n")
    s = load_settings({**MODEL, "RULES_PATH": str(tmp_path), "RUNPOD_WEBHOOK_GET_JOB": "http://x"})
    assert (s.rules_path, s.job_queue) == (tmp_path, True)
    assert (load_settings(MODEL).rules_path, load_settings(MODEL).job_queue) == (None, False)


def test_fallback_keeps_what_parses_and_defaults_the_rest() -> None:
    env = {"MAX_CONCURRENCY": "lots", "VLLM_SHUTDOWN_GRACE": "3", "RULES_PATH": "/nonexistent"}
    s = fallback_settings(env)
    # a rule pack that is not there is a bad value too: the built-in pack (None) instead
    assert (s.max_concurrency, s.shutdown_grace_s, s.rules_path) == (30, 3.0, None)
    assert (s.vllm_args, s.model) == ([], "")


def test_vllm_api_key_is_not_passed_on_and_warned_about() -> None:
    s = load_settings({**MODEL, "VLLM_API_KEY": "sk-secret-value"})
    assert any(w.startswith("VLLM_API_KEY is not passed to vLLM") for w in s.warnings)
    assert not any("sk-secret-value" in w for w in s.warnings)
    assert "VLLM_API_KEY" in HIDDEN_ENV


def test_config_error_renders_var_and_message() -> None:
    error = ConfigError("MAX_MODEL_LEN", "expected an integer")
    assert (error.var, error.message, str(error)) == (
        "MAX_MODEL_LEN",
        "expected an integer",
        "MAX_MODEL_LEN: expected an integer",
    )


# -- issue 23 §6: every setting validated first; paths looked up; text is UTF-8

BAD_BYTE = "\udcff"  # how os.environ carries the byte 0xff of a value that is not UTF-8


@pytest.mark.parametrize(
    "env",
    [
        {"MODEL_NAME": f"org/m{BAD_BYTE}"},  # an alias of a vLLM flag
        {**MODEL, "MAX_MODEL_LEN": f"40{BAD_BYTE}"},  # a vLLM flag
        {**MODEL, "HF_TOKEN": f"hf_x{BAD_BYTE}"},  # passed to vLLM as is
        {**MODEL, "VLLM_EXTRA_ARGS": f"--x {BAD_BYTE}"},
        {**MODEL, "BASE_PATH": f"/v{BAD_BYTE}"},  # the worker's own
    ],
)
def test_a_value_that_is_not_utf8_is_a_bad_setting_naming_it(env) -> None:
    # Was: a queue job left unanswered; in load-balancing mode a 500 UnicodeEncodeError.
    (name,) = [k for k, v in env.items() if BAD_BYTE in v]
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert caught.value.var == name
    assert "not valid UTF-8" in caught.value.message and "0xff" in caught.value.message
    caught.value.message.encode("utf-8")  # the message itself is sendable


def test_every_worker_setting_is_checked_even_when_another_module_reads_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({**MODEL, "LB_MAX_BODY_BYTES": "0"})
    assert caught.value.var == "LB_MAX_BODY_BYTES"


def test_base_path_with_a_name_over_255_bytes_is_named(tmp_path: Path) -> None:
    # Was: exit 1 with a bare OSError traceback (ENAMETOOLONG) before any answer.
    with pytest.raises(ConfigError) as caught:
        load_settings({**MODEL, "BASE_PATH": str(tmp_path / ("v" * 300))})
    assert caught.value.var == "BASE_PATH" and "255 bytes" in caught.value.message


def test_base_path_the_worker_cannot_search_is_named(monkeypatch, tmp_path: Path) -> None:
    # Was: exit 1 with a bare PermissionError traceback (the suite runs as root, which
    # may search anything: the refusal is the kernel's answer, given here).
    real_stat = settings_mod.p.os.stat
    blocked = str(tmp_path / "locked" / "volume")

    def stat(path, *args, **kwargs):
        if str(path) == blocked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(settings_mod.p.os, "stat", stat)
    with pytest.raises(ConfigError) as caught:
        load_settings({**MODEL, "BASE_PATH": blocked})
    assert caught.value.var == "BASE_PATH" and "Permission denied" in caught.value.message
    fallback = fallback_settings({**MODEL, "BASE_PATH": blocked})
    assert fallback.base_path == Path("/runpod-volume")  # the default: nothing touches it


def test_base_path_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        load_settings({**MODEL, "BASE_PATH": str(tmp_path / "f")})
    assert load_settings({**MODEL, "BASE_PATH": str(tmp_path / "absent")}).base_path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: "/nonexistent", "no rule file or folder"),
        (lambda tmp: "/dev/zero", "neither a rule file nor a folder"),
        (lambda tmp: str(tmp), "no *.yaml rule files"),
        (lambda tmp: str(tmp / "10.yaml"), "more than"),
    ],
    ids=["missing", "device", "empty-folder", "too-large"],
)
def test_a_rule_pack_path_that_cannot_be_a_pack_is_named(tmp_path, make, message) -> None:
    # Was: exit 3 without an answer (and /dev/zero would be read without end).
    with (tmp_path / "10.yaml").open("wb") as big:
        big.truncate(17 * 1024 * 1024)  # sparse: 17 MiB without writing them
    if "empty" in message or "*.yaml" in message:
        (tmp_path / "10.yaml").unlink()
    with pytest.raises(ConfigError) as caught:
        load_settings({**MODEL, "RULES_PATH": make(tmp_path)})
    assert caught.value.var == "RULES_PATH" and message in caught.value.message
