"""worker.config.flags: environment variables -> `vllm serve` arguments, against the real snapshot."""

from __future__ import annotations

import os

import pytest

from worker.config.errors import ConfigError
from worker.config.flags import (
    ALIASES,
    PASSTHROUGH_ENV,
    REMOVED_FLAGS,
    SERVER_OWNED,
    build_args,
    env_name,
    load_flags,
    model_arg,
    served_name_arg,
)
from worker.config.settings import WORKER_ENV

SPEC = '{"model": "org/draft", "num_speculative_tokens": 3, "method": "eagle3"}'


@pytest.mark.parametrize(
    ("setting", "flag"),
    [
        ("MAX_MODEL_LEN=4096", "--max-model-len"),
        ("MAX_MODEL_LEN=32k", "--max-model-len"),
        ("MAX_MODEL_LEN=1M", "--max-model-len"),
        ("MAX_MODEL_LEN=auto", "--max-model-len"),
        ("MAX_NUM_BATCHED_TOKENS=16k", "--max-num-batched-tokens"),
        ("TENSOR_PARALLEL_SIZE=2", "--tensor-parallel-size"),
        ("GPU_MEMORY_UTILIZATION=0.95", "--gpu-memory-utilization"),
        ("MAX_PARALLEL_LOADING_WORKERS=None", "--max-parallel-loading-workers"),
        (f"SPECULATIVE_CONFIG={SPEC}", "--speculative-config"),
        ('HF_OVERRIDES={"rope_parameters": {"factor": 4.0}}', "--hf-overrides"),
        ('LIMIT_MM_PER_PROMPT={"image": 2}', "--limit-mm-per-prompt"),
        # A second long spelling of the same flag.
        ("DEVICE_MEMORY_UTILIZATION=0.8", "--gpu-memory-utilization"),
        # Aliases from the old worker-vllm.
        ("MODEL_NAME=org/m", "--model"),
        ("MODEL_REVISION=abc", "--revision"),
        ("TOKENIZER_NAME=org/t", "--tokenizer"),
        ("TOKENIZER_REVISION=def", "--tokenizer-revision"),
        ("OPENAI_SERVED_MODEL_NAME_OVERRIDE=m", "--served-model-name"),
        ("CUSTOM_CHAT_TEMPLATE={{ messages }}", "--chat-template"),
    ],
)
def test_a_value_becomes_its_flag(setting: str, flag: str) -> None:
    name, _, value = setting.partition("=")
    _assert_becomes({name: value}, [flag, value])


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ({"ENFORCE_EAGER": "true"}, ["--enforce-eager"]),
        ({"ENFORCE_EAGER": "0"}, ["--no-enforce-eager"]),
        ({"ENABLE_PREFIX_CACHING": "false"}, ["--no-enable-prefix-caching"]),
        ({"ENABLE_PREFIX_CACHING": "On"}, ["--enable-prefix-caching"]),
        ({"TRUST_REMOTE_CODE": "YES"}, ["--trust-remote-code"]),
        ({"DISABLE_LOG_STATS": "true"}, ["--disable-log-stats"]),
        ({"DISABLE_LOG_STATS": "off"}, []),
        ({"DTYPE": "  bfloat16\n"}, ["--dtype", "bfloat16"]),
        ({"MAX_MODEL_LEN": ""}, []),
        ({"ENFORCE_EAGER": "   "}, []),
        # Flags that take several values: words, a JSON list, or one JSON object.
        ({"CUDAGRAPH_CAPTURE_SIZES": "1 2 4"}, ["--cudagraph-capture-sizes", "1", "2", "4"]),
        ({"SERVED_MODEL_NAME": '["a", "b"]'}, ["--served-model-name", "a", "b"]),
        (
            {"LORA_MODULES": '{"name": "x", "path": "/l"}'},
            ["--lora-modules", '{"name": "x", "path": "/l"}'],
        ),
        (
            {"LORA_MODULES": '[{"name": "x", "path": "/l"}, "y=/m"]'},
            ["--lora-modules", '{"name": "x", "path": "/l"}', "y=/m"],
        ),
        ({"MIDDLEWARE": "a.b c.d"}, ["--middleware", "a.b", "--middleware", "c.d"]),
        # Unrelated environment and the worker's own settings never become flags.
        ({"PATH": "/bin", "HOME": "/root", "SSL_CERT_FILE": "/c.pem", "RUNPOD_POD_ID": "x"}, []),
        ({"MAX_CONCURRENCY": "5", "VLLM_PORT": "8001", "REQUEST_TIMEOUT": "9"}, []),
        # huggingface_hub reads HF_TOKEN itself; it must never reach the command line.
        ({"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz"}, []),
    ],
)
def test_env_becomes_flags(env: dict[str, str], args: list[str]) -> None:
    _assert_becomes(env, args)


def _assert_becomes(env: dict[str, str], args: list[str]) -> None:
    result = build_args(env)
    assert result.args == args
    assert result.warnings == []


def test_model_comes_first_then_flags_sorted() -> None:
    env = {"SEED": "1", "MODEL_NAME": "org/m", "ENFORCE_EAGER": "1", "DTYPE": "half"}
    assert build_args(env).args == [
        "--model", "org/m", "--dtype", "half", "--enforce-eager", "--seed", "1"
    ]  # fmt: skip


def test_extra_args_are_split_and_appended_last() -> None:
    env = {
        "VLLM_EXTRA_ARGS": "--max-model-len 1024 --chat-template 'a b' --foo=\"x y\"",
        "MAX_MODEL_LEN": "4096",
        "MODEL": "org/m",
    }
    assert build_args(env).args == [
        "--model", "org/m", "--max-model-len", "4096",
        "--max-model-len", "1024", "--chat-template", "a b", "--foo=x y",
    ]  # fmt: skip


def test_extra_args_that_do_not_split_name_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        build_args({"VLLM_EXTRA_ARGS": "--chat-template 'unclosed"})
    assert info.value.var == "VLLM_EXTRA_ARGS"


@pytest.mark.parametrize(
    ("extra", "kept"),
    [
        ("--port 9000 --seed 1", ["--seed", "1"]),
        ("--host=0.0.0.0 --seed 1", ["--seed", "1"]),
        ("--api-key k1 k2 --seed 1", ["--seed", "1"]),
        ("--api_key k1", []),
        ("--enable-ssl-refresh --no-enable-ssl-refresh --headless --seed 1", ["--seed", "1"]),
        # vLLM's argparse accepts unique prefixes (allow_abbrev): so does the filter.
        ("--api-k k1 --seed 1", ["--seed", "1"]),
        ("--api_k=k1 --seed 1", ["--seed", "1"]),
        ("--ssl-k /k1 --seed 1", ["--seed", "1"]),
        ("--he --seed 1", ["--seed", "1"]),
        ("--headl --uds /k1", []),
    ],
)
def test_extra_args_lose_flags_the_worker_owns(extra: str, kept: list[str]) -> None:
    result = build_args({"VLLM_EXTRA_ARGS": extra})
    assert result.args == kept
    assert result.warnings and all("VLLM_EXTRA_ARGS" in w for w in result.warnings)
    assert not any("k1" in w or "9000" in w for w in result.warnings)


@pytest.mark.parametrize("var", ["HOST", "PORT", "API_KEY", "UDS", "SSL_KEYFILE", "ROOT_PATH"])
def test_server_flags_are_ignored_with_a_warning(var: str) -> None:
    result = build_args({var: "secret-ish-value", "SEED": "3"})
    assert result.args == ["--seed", "3"]
    assert len(result.warnings) == 1
    assert var in result.warnings[0]
    assert "secret-ish-value" not in result.warnings[0]


def test_direct_form_wins_over_alias_with_a_warning() -> None:
    result = build_args({"MODEL_NAME": "org/alias", "MODEL": "org/direct"})
    assert result.args == ["--model", "org/direct"]
    assert result.warnings == ["MODEL_NAME is ignored because MODEL is also set"]


def test_primary_spelling_wins_over_a_second_long_flag() -> None:
    result = build_args({"GPU_MEMORY_UTILIZATION": "0.9", "DEVICE_MEMORY_UTILIZATION": "0.5"})
    assert result.args == ["--gpu-memory-utilization", "0.9"]
    assert result.warnings == [
        "DEVICE_MEMORY_UTILIZATION is ignored because GPU_MEMORY_UTILIZATION is also set"
    ]


@pytest.mark.parametrize(
    ("var", "fragment"),
    [
        ("DISABLE_LOG_REQUESTS", "ENABLE_LOG_REQUESTS=true"),
        ("WORKER_USE_RAY", "DISTRIBUTED_EXECUTOR_BACKEND=ray"),
        ("SWAP_SPACE", "no replacement"),
        ("MAX_SEQ_LEN_TO_CAPTURE", "MAX_CUDAGRAPH_CAPTURE_SIZE"),
        ("GUIDED_DECODING_BACKEND", 'STRUCTURED_OUTPUTS_CONFIG=\'{"backend": "1"}\''),
    ],
)
def test_removed_flags_warn_with_their_replacement(var: str, fragment: str) -> None:
    result = build_args({var: "1"})
    assert result.args == []
    assert len(result.warnings) == 1
    assert result.warnings[0].startswith(f"{var} is not a vLLM 0.32.0 flag; ignored: ")
    assert fragment in result.warnings[0]


def test_removed_flag_table_only_lists_names_that_are_not_flags() -> None:
    flags = load_flags()
    assert not set(REMOVED_FLAGS) & set(flags.by_env)


@pytest.mark.parametrize(
    "still_a_flag",
    [
        "MAX_PARALLEL_LOADING_WORKERS",
        "DISABLE_LOG_STATS",
        "ENABLE_CHUNKED_PREFILL",
        "BLOCK_SIZE",
        "DISABLE_CUSTOM_ALL_REDUCE",
    ],
)
def test_old_worker_names_that_vllm_still_has_are_mapped(still_a_flag: str) -> None:
    assert still_a_flag in load_flags().by_env


def test_deprecated_flags_are_passed_with_vllms_warning() -> None:
    result = build_args({"DISABLE_CASCADE_ATTN": "true"})
    assert result.args == ["--disable-cascade-attn"]
    assert result.warnings[0].startswith("DISABLE_CASCADE_ATTN: --disable-cascade-attn is deprec")


@pytest.mark.parametrize(
    ("env", "var", "fragment"),
    [
        ({"ENFORCE_EAGER": "maybe"}, "ENFORCE_EAGER", "true/false, 1/0, yes/no or on/off"),
        ({"DISABLE_LOG_STATS": "2"}, "DISABLE_LOG_STATS", "true/false"),
        ({"MAX_MODEL_LEN": "lots"}, "MAX_MODEL_LEN", "'lots'"),
        ({"MAX_MODEL_LEN": "1.5K"}, "MAX_MODEL_LEN", "or auto"),
        ({"TENSOR_PARALLEL_SIZE": "two"}, "TENSOR_PARALLEL_SIZE", "an integer"),
        ({"TENSOR_PARALLEL_SIZE": "32k"}, "TENSOR_PARALLEL_SIZE", "an integer"),
        ({"GPU_MEMORY_UTILIZATION": "90%"}, "GPU_MEMORY_UTILIZATION", "a number"),
        ({"CUDAGRAPH_CAPTURE_SIZES": "1 2 x"}, "CUDAGRAPH_CAPTURE_SIZES", "'x'"),
        ({"LIMIT_MM_PER_PROMPT": "{image: 2}"}, "LIMIT_MM_PER_PROMPT", "expected JSON"),
        ({"MODEL_NAME": "m", "MAX_NUM_SEQS": "many"}, "MAX_NUM_SEQS", "an integer"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], var: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_args(env)
    assert info.value.var == var
    assert str(info.value).startswith(f"{var}: ")
    assert fragment in info.value.message


@pytest.mark.parametrize(
    "env",
    [
        # not a secret name, but a token's shape is never shown
        {"MAX_NUM_BATCHED_TOKENS": "hf_supersecretsupersecret12345"},
        {"HF_TOKEN": "hf_supersecret", "VLLM_EXTRA_ARGS": "--api-key hf_supersecret"},
        {"API_KEY": "hf_supersecret"},
        {"MY_SECRET": "hf_supersecret", "SOME_PASSWORD": "hf_supersecret"},
    ],
)
def test_secrets_never_appear_in_messages(env: dict[str, str]) -> None:
    try:
        result = build_args(env)
    except ConfigError as exc:
        assert "hf_supersecret" not in str(exc)
    else:
        assert not any("hf_supersecret" in w for w in result.warnings)
        assert "hf_supersecret" not in result.args


def test_config_file_is_passed_and_read(tmp_path) -> None:
    config = tmp_path / "vllm.yaml"
    config.write_text("model: org/from-config\nmax_model_len: 2048\nenable-prefix-caching: false\n")
    result = build_args({"VLLM_CONFIG_FILE": str(config), "MAX_MODEL_LEN": "4096"})
    assert result.args == ["--config", str(config), "--max-model-len", "4096"]
    assert result.config == {
        "model": "org/from-config",
        "max_model_len": 2048,
        "enable-prefix-caching": False,
    }
    assert result.warnings == []


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("missing.yaml", None, "cannot read"),
        ("list.yaml", "- a\n- b\n", "YAML mapping"),
        ("empty.yaml", "", "YAML mapping"),
        ("broken.yaml", "a: [1, 2\n", "not valid YAML"),
        ("leaky.yaml", "hf-token: abc\nx: [abc\n", "not valid YAML"),
        ("config.json", "{}", ".yaml or .yml"),
        ("owned.yaml", "api-key: abc\n", "'api-key'"),
        ("owned2.yaml", "uds: /tmp/s\n", "'uds'"),
    ],
)
def test_bad_config_file_names_the_variable(tmp_path, name, text, fragment) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as info:
        build_args({"VLLM_CONFIG_FILE": str(path)})
    assert info.value.var == "VLLM_CONFIG_FILE"
    assert fragment in info.value.message
    assert "abc" not in str(info.value)


def test_config_file_warnings(tmp_path) -> None:
    path = tmp_path / "c.yml"
    path.write_text("port: 9000\nenable_prefix_caching: false\nno_such_flag: 1\n")
    result = build_args({"VLLM_CONFIG_FILE": str(path)})
    assert result.warnings == [
        f"VLLM_CONFIG_FILE: vLLM ignores 'enable_prefix_caching: false' in {path}; "
        "write 'enable-prefix-caching: false'",
        f"VLLM_CONFIG_FILE: 'no_such_flag' in {path} is not a vLLM 0.32.0 flag",
    ]


def test_direct_config_wins_over_alias(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("seed: 1\n")
    result = build_args({"CONFIG": str(path), "VLLM_CONFIG_FILE": str(tmp_path / "nope.yaml")})
    assert result.args == ["--config", str(path)]
    assert result.warnings == ["VLLM_CONFIG_FILE is ignored because CONFIG is also set"]


@pytest.mark.parametrize(
    ("args", "model"),
    [
        ([], None),
        (["--model", "a"], "a"),
        (["--model=a"], "a"),
        (["--seed", "1", "--model", "a", "--model", "b"], "a"),  # vLLM serves the first
        (["--model"], None),
        (["--served-model-name", "x"], None),
    ],
)
def test_model_arg(args: list[str], model: str | None) -> None:
    assert model_arg(args) == model


def test_served_name_arg_takes_the_last_occurrence() -> None:
    assert served_name_arg(["--served-model-name", "a", "b", "--served_model_name=c"]) == "c"
    assert served_name_arg(["--model", "m"]) is None


def test_model_given_twice_warns() -> None:
    result = build_args({"MODEL": "a", "VLLM_EXTRA_ARGS": "--model b"})
    assert model_arg(result.args) == "a"
    assert any("--model is given twice" in w for w in result.warnings)


def test_reserved_names_do_not_collide_with_flags() -> None:
    flags = load_flags()
    # Flags the worker sets itself may share a worker variable's name (PORT and --port).
    owned = {env_name(flag) for flag in SERVER_OWNED}
    assert not ((WORKER_ENV | set(ALIASES)) & set(flags.by_env)) - owned
    assert set(flags.by_env) >= PASSTHROUGH_ENV  # else the entry is stale
    for flag in ALIASES.values():
        assert flag in flags.by_flag


def test_snapshot_is_valid_json_next_to_the_module() -> None:
    flags = load_flags()
    assert flags.vllm_version == "0.32.0"
    assert flags.by_flag["--max-model-len"].type == "human_readable_int_or_auto"
    assert flags.by_flag["--enable-prefix-caching"].negative == "--no-enable-prefix-caching"


@pytest.mark.parametrize("prefix", ["--api-k", "--ssl-k", "--he", "--enable-ssl-r"])
def test_an_abbreviation_resolves_as_vllms_argparse_does(prefix: str) -> None:
    """vLLM keeps argparse's allow_abbrev: a unique prefix of a long option is that option."""
    flag = load_flags().resolve(prefix)
    assert flag is not None and flag.name.startswith(prefix)


@pytest.mark.parametrize("prefix", ["--ma", "--enable", "--nope-nothing"])
def test_an_ambiguous_or_unknown_prefix_resolves_to_nothing(prefix: str) -> None:
    assert load_flags().resolve(prefix) is None
    assert build_args({"VLLM_EXTRA_ARGS": f"{prefix} 1"}).args == [prefix, "1"]


def test_a_fifo_config_file_is_refused_without_blocking(tmp_path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as info:
        build_args({"VLLM_CONFIG_FILE": str(fifo)})
    assert info.value.var == "VLLM_CONFIG_FILE"
    assert "not a regular file" in info.value.message


def test_a_link_to_an_endless_device_is_refused(tmp_path) -> None:
    link = tmp_path / "config.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ConfigError) as info:
        build_args({"VLLM_CONFIG_FILE": str(link)})
    assert "not a regular file" in info.value.message


def test_a_huge_config_file_is_refused(tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    with pytest.raises(ConfigError) as info:
        build_args({"VLLM_CONFIG_FILE": str(path)})
    assert "larger than" in info.value.message


def test_a_non_utf8_config_file_names_the_variable(tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"max-model-len: 4096\nseed: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        build_args({"VLLM_CONFIG_FILE": str(path)})
    assert str(info.value).startswith("VLLM_CONFIG_FILE: ")
    assert "VLLM_CONFIG_FILE=" in info.value.message and "UTF-8" in info.value.message
