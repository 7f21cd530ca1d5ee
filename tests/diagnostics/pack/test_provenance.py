"""Judged by provenance (docs/diagnostics.md): the generated data is current, its schema
is checked on load, and an exception no specific rule names is judged by where it was
raised and by its type."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diagnostics import classify_lines
from diagnostics.model import Category, State
from diagnostics.pack.evidence import parse_provenance, project_path
from diagnostics.pack.rules import RulePackError, load_pack
from tests.support.packs import both_paths, shipped_pack
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "rules"
# Mechanism tests use their own data, so that they hold whatever the catalogue says.
DATA = """\
provenance:
  deterministic: [AssertionError, JSONDecodeError, KeyError, NotImplementedError, TypeError,
                  UnicodeDecodeError, ValueError]
  deterministic_in: [vllm]
  exceptions: {LocalEntryNotFoundError: network}
  functions: {"vllm/worker/worker.py:_check_if_gpu_supports_dtype": model_requirement}
  modules: {"vllm/v1/core/kv_cache_utils.py": kv_cache, "vllm/worker/worker.py": other}
  packages: {"vllm/model_executor/layers/quantization/": model_requirement,
             "transformers/": other, "transformers_modules/": remote_code}
"""


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rules")
    for file in RULES.glob("*.yaml"):
        if "provenance" not in file.name:
            shutil.copy(file, folder / file.name)
    (folder / "95-provenance.yaml").write_text(DATA)
    return load_pack(folder)


def frame(path: str, function: str, line: int = 10) -> str:
    return f'  File "/usr/local/lib/python3.10/dist-packages/{path}", line {line}, in {function}'


def raised_in(path: str, function: str, *after: str) -> list[str]:
    """A traceback of one frame (``function`` in ``path``), then the ``after`` lines."""
    return ["Traceback (most recent call last):", frame(path, function), *after]


def test_the_committed_data_is_current(capsys):
    assert load_script("gen_provenance").main(["--check"]) == 0, capsys.readouterr().out


def test_the_shipped_pack_loads_it():
    assert load_pack().provenance.deterministic >= {"ValueError", "TypeError"}


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ({"modules": {"vllm/x.py": "nonsense"}}, "not a category"),
        ({"colour": []}, "unknown field"),
        ({"deterministic_in": ["numpy"]}, "projects are"),
        ({"packages": {"vllm/x.py": "other"}}, "not a project path"),
    ],
)
def test_a_broken_section_is_refused(section, error, tmp_path):
    with pytest.raises(ValueError, match=error):
        parse_provenance(section, "provenance")
    shutil.copy(RULES / "90-generic.yaml", tmp_path / "90-generic.yaml")
    import yaml

    (tmp_path / "95-provenance.yaml").write_text(yaml.safe_dump({"provenance": section}))
    with pytest.raises(RulePackError, match=r"95-provenance\.yaml"):
        load_pack(tmp_path)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/usr/lib/python3/dist-packages/vllm/worker/worker.py", "vllm/worker/worker.py"),
        ("~/env/lib/python3.8/site-packages/vllm/entrypoints/llm.py", "vllm/entrypoints/llm.py"),
        ("/home/me/src/vllm/vllm/config.py", "vllm/config.py"),
        # a model repository's own code, in the cache of a user named vllm
        (
            "/home/vllm/.cache/huggingface/modules/transformers_modules/org/m-7b/0a1b/x.py",
            "transformers_modules/org/m-7b/0a1b/x.py",
        ),
        ("/app/main.py", None),
    ],
)
def test_a_frame_path_is_read_relative_to_its_project(path, expected):
    assert project_path(path) == expected


def test_an_unknown_value_error_raised_by_vllm_is_permanent_with_its_category(pack):
    lines = raised_in(
        "vllm/model_executor/layers/quantization/frobq.py",
        "get_quant_method",
        "    raise ValueError(",
        "ValueError: frob-4 kernels need group_size 64, got 96",
    )
    diagnosis = classify_lines(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == (
        "model_requirement",
        State.FAILED_PERMANENT,
    )
    assert "group_size 64, got 96" in (diagnosis.cause or "")
    # The same line without the frames says nothing about where: other, a restart.
    bare = classify_lines(lines[-1:], pack)
    assert (str(bare.category), bare.state) == ("other", State.FAILED_TRANSIENT)


def test_a_deterministic_error_where_no_category_holds_is_other_and_permanent(pack):
    """Raised by vLLM's own code in a place whose raise sites agree on no category: the
    type still says a restart on the same settings fails the same way."""
    lines = raised_in(
        "vllm/entrypoints/frob_server.py", "<module>", "TypeError: frob() got 2 arguments"
    )
    diagnosis = classify_lines(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "fails the same way" in (diagnosis.fix or "")
    # Not vLLM's own code: a restart may help.
    elsewhere = raised_in("torch/frob.py", "frob", "TypeError: frob() got 2 arguments")
    assert classify_lines(elsewhere, pack).state is State.FAILED_TRANSIENT


def test_the_standard_librarys_subclasses_of_a_deterministic_type_are_deterministic():
    names = load_pack().provenance.deterministic
    assert {"JSONDecodeError", "UnicodeDecodeError", "TOMLDecodeError"} <= names
    # (not what the generating process happened to import: only Python's own parsers)
    assert "RegexError" not in names and "EvidenceError" not in names


@pytest.mark.parametrize(
    "message",
    [
        "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: "
        "line 10 column 1 (char 398)",
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid "
        "start byte",
    ],
)
def test_a_file_vllm_parses_that_does_not_parse_is_permanent_and_says_so(pack, message):
    """The parser (Python's json, in its own folder) raised for a file vLLM's own code
    opened while the engine was built: the file stays as it is, so does the failure."""
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/transformers_utils/config.py", "get_hf_file_to_dict"),
        "    return json.load(file)",
        '  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode',
        "    obj, end = self.scan_once(s, idx)",
        message,
    ]
    diagnosis = classify_lines(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "does not parse" in (diagnosis.fix or "")
    # raised where a file is downloaded (transformers' or the hub's): it may be a file cut
    # short or a proxy's page, so a restart may still help
    for path, function in [
        ("transformers/utils/hub.py", "cached_file"),
        ("huggingface_hub/hf_api.py", "model_info"),
    ]:
        elsewhere = [lines[0], frame(path, function), *lines[2:]]
        assert classify_lines(elsewhere, pack).state is State.FAILED_TRANSIENT, path


def test_a_file_transformers_parses_that_does_not_parse_is_permanent(pack):
    """transformers reading a model's file from disk (its tokenizer_config.json) with
    Python's json: the file on disk is the same on every start."""
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/transformers_utils/tokenizer.py", "get_tokenizer"),
        "    tokenizer = AutoTokenizer.from_pretrained(",
        frame("transformers/models/auto/tokenization_auto.py", "get_tokenizer_config"),
        "    result = json.load(reader)",
        '  File "/usr/lib/python3.12/json/decoder.py", line 354, in raw_decode',
        "    obj, end = self.scan_once(s, idx)",
        "json.decoder.JSONDecodeError: Invalid control character at: line 198 column 66 (char 5873)",
    ]
    diagnosis = both_paths(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "does not parse" in (diagnosis.fix or "")
    assert "line 198 column 66" in (diagnosis.cause or "")
    # another type raised there (transformers is not vLLM): a restart may help
    other = [*lines[:-1], "ValueError: something in transformers"]
    assert both_paths(other, pack).state is State.FAILED_TRANSIENT


def test_a_runtime_error_keeps_the_permanence_of_its_category(pack):
    lines = raised_in(
        "vllm/worker/worker.py", "init_device", "RuntimeError: something odd happened"
    )
    diagnosis = classify_lines(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_TRANSIENT)


def test_an_error_outside_vllm_is_not_deterministic(pack):
    lines = raised_in(
        "transformers/modeling_utils.py", "from_pretrained", "ValueError: something in transformers"
    )
    assert classify_lines(lines, pack).state is State.FAILED_TRANSIENT


@pytest.mark.parametrize(
    "prefix", ["", "(EngineCore pid=3) ", "2024-01-01 10:00:00 | ERROR | stderr | "]
)
@pytest.mark.parametrize("raise_line", [False, True], ids=["stops-at-frame", "raise-shown"])
def test_a_traceback_cut_before_its_message_is_judged_by_its_innermost_frame(
    pack, prefix, raise_line
):
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/engine/llm_engine.py", "_init_workers"),
        frame("vllm/worker/worker.py", "init_model"),
        "    _check_if_gpu_supports_dtype(self.model_config.dtype)",
        frame("vllm/worker/worker.py", "_check_if_gpu_supports_dtype"),
    ]
    if raise_line:
        if "pid=" in prefix:
            pytest.skip("a process prefix takes the code line's indent with it")
        lines.append("    raise ValueError(")
    diagnosis = classify_lines([prefix + line for line in lines], pack)
    assert str(diagnosis.category) == "model_requirement"
    # Where the paste stops is not known to be where it was raised: transient, unless
    # the raise line shows it (a ValueError raised by vLLM: permanent).
    assert diagnosis.permanent is raise_line


def test_a_frame_cut_at_a_terminal_width_still_names_its_module(pack):
    first = '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 7'
    first += "58, in _chec"[: 120 - len(first)]
    lines = [
        "Traceback (most recent call last):",
        first.ljust(120)[:120],
        "k_enough_kv_cache_memory",
    ]
    lines += [
        "ValueError: To serve at least one request with the model's max seq len (100000), (4.2"
    ]
    assert str(classify_lines(lines, pack).category) == "kv_cache"


IPYTHON_TRACEBACK = [
    "ValueError                                Traceback (most recent call last)",
    "Cell In[5], line 3",
    '----> 3 llm = LLM(model="/ckpt/tiny")',
    "File /opt/conda/lib/python3.10/site-packages/vllm/entrypoints/llm.py:105, in "
    "LLM.__init__(self, model)",
    "--> 105 self.llm_engine = LLMEngine.from_engine_args(engine_args)",
    "File /opt/conda/lib/python3.10/site-packages/vllm/model_executor/layers/attention.py:52, "
    "in PagedAttention.__init__(self, num_heads, head_size)",
    "---> 53     raise ValueError(",
]


@pytest.mark.parametrize("message", [False, True], ids=["cut-before-message", "message"])
def test_an_ipython_header_exception_is_raised_where_the_frames_after_it_end(message):
    """The header names the class before the frames: where they end is where it was
    raised; the exception line after them, when the paste keeps it, is the evidence."""
    lines = IPYTHON_TRACEBACK + (["ValueError: head_size (48) is frobbed."] if message else [])
    # the shipped pack's provenance data: attention.py raises requirements
    diagnosis = both_paths(lines, shipped_pack())
    assert (str(diagnosis.category), diagnosis.state) == (
        "model_requirement",
        State.FAILED_PERMANENT,
    )
    assert ("head_size (48) is frobbed" in (diagnosis.cause or "")) is message
    assert diagnosis.evidence is not None
    assert diagnosis.evidence.text == lines[-1 if message else 0]


def test_an_ipython_header_is_judged_by_its_class(pack):
    lines = [
        "LocalEntryNotFoundError                   Traceback (most recent call last)",
        "Cell In[3], line 1",
        "----> 1 llm = LLM(model='org/model')",
        "File ~/env/lib/python3.8/site-packages/vllm/entrypoints/llm.py:62, in LLM.__init__(self)",
    ]
    diagnosis = classify_lines(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("network", State.FAILED_TRANSIENT)


REPO_CODE = "/root/.cache/huggingface/modules/transformers_modules/org/glm-6b/3f9c"


def repo_frame(name: str, function: str) -> str:
    return f'  File "{REPO_CODE}/{name}", line 104, in {function}'


def test_an_error_raised_in_the_repositorys_own_code_is_remote_code_and_permanent(pack):
    """The model repository's code (trust_remote_code) raising while it loads fails the
    same way on every restart on this image; its fix is not "trust the code" (it ran)."""
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/transformers_utils/tokenizer.py", "get_tokenizer"),
        repo_frame("tokenization_glm.py", "__init__"),
        frame("transformers/tokenization_utils.py", "__init__"),
        repo_frame("tokenization_glm.py", "vocab_size"),
        "    return self.tokenizer.n_words",
        "AttributeError: 'GLMTokenizer' object has no attribute 'tokenizer'",
    ]
    diagnosis = both_paths(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == (
        "remote_code",
        State.FAILED_PERMANENT,
    )
    assert "repository's own code" in (diagnosis.cause or "")
    assert "MODEL_REVISION" in (diagnosis.fix or "")
    assert "TRUST_REMOTE_CODE=true" not in (diagnosis.fix or "")
    # Raised in transformers, called by the repository's code: an AttributeError or
    # TypeError there is the library rejecting the call (an API that changed), so the
    # repository's code fits another version: remote_code, permanent, named where raised.
    # (an object other than a tokenizer: a tokenizer's own is remote-code-tokenizer-broken)
    called = [*lines[:4], "AttributeError: 'GLMProcessor' object has no attribute 'sp'"]
    diagnosis = classify_lines(called, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("remote_code", State.FAILED_PERMANENT)
    assert "transformers/tokenization_utils.py (__init__), called by the model" in (
        diagnosis.cause or ""
    )
    # another type raised there says something else (a kernel's, a setting's): its place
    other = [*lines[:4], "RuntimeError: shape '[4, 32]' is invalid for input of size 96"]
    assert str(classify_lines(other, pack).category) != "remote_code"
    # the same error with no repository frame above it is transformers' own
    alone = [lines[0], lines[1], lines[3], called[-1]]
    assert str(classify_lines(alone, pack).category) == "other"
    # Cut before the message: where the paste stops is not known to be where it was raised.
    assert classify_lines(lines[:-1], pack).category is not Category.REMOTE_CODE


def test_an_attribute_accessor_raising_for_its_caller_is_judged_where_it_was_called(pack):
    """A generic accessor (``__getattr__``, ``__getattribute__``) raises for whatever its
    caller asked of an object: the caller's frame is where the lookup failed (the model
    repository's tokenizer asking transformers' for what this version no longer has)."""
    accessor = frame("transformers/tokenization_utils_base.py", "__getattr__")
    raise_line = '    raise AttributeError(f"{self.__class__.__name__} has no attribute {key}")'
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/transformers_utils/tokenizer.py", "get_tokenizer"),
        repo_frame("tokenization_chatglm.py", "get_vocab"),
        accessor,
        raise_line,
        "AttributeError: ChatGLMTokenizer has no attribute vocab_size",
    ]
    diagnosis = both_paths(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("remote_code", State.FAILED_PERMANENT)
    assert "tokenization_chatglm.py (get_vocab)" in (diagnosis.cause or "")
    # Any other function of that library there: raised where the library is, called by
    # the repository's code (an AttributeError: the call an older or newer API rejects).
    other = [*lines[:3], frame("transformers/tokenization_utils.py", "_add_tokens"), *lines[4:]]
    diagnosis = both_paths(other, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("remote_code", State.FAILED_PERMANENT)
    assert "tokenization_utils.py (_add_tokens), called by the model" in (diagnosis.cause or "")
    # An accessor with no project frame above it: its own place decides.
    alone = ["Traceback (most recent call last):", accessor, *lines[4:]]
    assert str(both_paths(alone, pack).category) == "other"


def test_another_projects_accessor_raising_for_vllms_lookup_is_a_version_mismatch(pack):
    """vLLM's own code asking a transformers object (its ``__getattr__``) for what the
    installed transformers lacks (held-out ZA: "Qwen2TokenizerFast has no attribute
    all_special_tokens_extended"): the two versions do not fit, the same on every start
    on this image: other, permanent, naming the project; vLLM's own accessor is not
    another project's, and the exception line cut says nothing."""
    accessor = frame("transformers/tokenization_utils_base.py", "__getattr__")
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/engine/llm_engine.py", "__init__"),
        frame("vllm/transformers_utils/tokenizer.py", "get_cached_tokenizer"),
        accessor,
        '    raise AttributeError(f"{self.__class__.__name__} has no attribute {key}")',
        "AttributeError: Qwen2TokenizerFast has no attribute all_special_tokens_extended",
    ]
    diagnosis = both_paths(lines, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("other", State.FAILED_PERMANENT)
    assert "asking transformers for what its installed version lacks" in (diagnosis.cause or "")
    assert "transformers version this vLLM release requires" in (diagnosis.fix or "")
    # another exception type through the accessor: no such judgement
    other = [*lines[:-1], "RuntimeError: Qwen2TokenizerFast failed"]
    assert both_paths(other, pack).state is not State.FAILED_PERMANENT
    # the message cut: the accessor's raise line still shows the type
    assert both_paths(lines[:-1], pack).state is State.FAILED_PERMANENT
    # vLLM's own accessor (its envs module's __getattr__), and the paste cut at the frame
    own = [*lines[:3], frame("vllm/envs.py", "__getattr__"), *lines[4:]]
    assert "installed version lacks" not in (both_paths(own, pack).cause or "")
    assert both_paths(lines[:-2], pack).state is not State.FAILED_PERMANENT


def test_a_specific_cause_raised_in_the_repositorys_code_keeps_its_category(pack):
    lines = [
        "Traceback (most recent call last):",
        repo_frame("modeling_glm.py", "forward"),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.65 GiB of which 1.02 GiB is free.",
    ]
    assert str(classify_lines(lines, pack).category) == "oom"


def test_a_bare_assertion_is_judged_with_what_it_asserted(pack):
    """A bare ``AssertionError``: the code line under its frame says what was asserted.
    On the parallel sizes chosen (tensor or pipeline parallel) it is the user's layout
    that the model's shape does not divide: bad_config, whatever code asserts it."""
    layout = raised_in(
        "vllm/model_executor/layers/quantization/frobq.py",
        "__init__",
        "    assert self.total_num_kv_heads % tp_size == 0",
        "AssertionError",
    )
    diagnosis = both_paths(layout, pack)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)
    assert "assert self.total_num_kv_heads % tp_size == 0." in (diagnosis.cause or "")
    # Another assertion there: its place decides, and the cause still says what it was.
    shape = [*layout[:2], "    assert weight.shape[0] % 64 == 0", "AssertionError"]
    diagnosis = both_paths(shape, pack)
    assert str(diagnosis.category) == "model_requirement"
    assert "assert weight.shape[0] % 64 == 0." in (diagnosis.cause or "")
    # The assert line's expression called on (a deeper frame): not what was asserted.
    deeper = [*layout[:3], frame("torch/nn/modules/module.py", "__getattr__"), "AssertionError"]
    assert str(both_paths(deeper, pack).category) != "bad_config"


ENGINE_CONFIG = (
    "INFO 02-11 09:47:21 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2) with config: "
    "model='intfloat/e5-large', dtype=torch.float16, "
    "pooler_config=PoolerConfig(pooling_type='AVG', normalize=True)"
)


def test_an_error_quoting_a_value_the_start_was_set_to_is_bad_config(pack):
    """vLLM's own code rejecting a value the start logged among its settings (an enum
    looked up by the user's value): the user's choice, bad_config, the setting named."""
    lookup = raised_in(
        "vllm/model_executor/layers/pooler.py",
        "from_config_with_defaults",
        "    pooling_type=PoolingType[pooler_config.pooling_type]",
        '  File "/usr/lib/python3.12/enum.py", line 813, in __getitem__',
        "KeyError: 'AVG'",
    )
    diagnosis = both_paths([ENGINE_CONFIG, *lookup], pack)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)
    assert "pooling_type='AVG'" in (diagnosis.cause or "")
    # Without the settings in the log, or quoting a value no setting holds: its place.
    assert str(both_paths(lookup, pack).category) == "other"
    other = [ENGINE_CONFIG, *lookup[:-1], "KeyError: 'LAST'"]
    assert str(both_paths(other, pack).category) == "other"


@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_a_value_chosen_beats_the_shape_another_rule_reads(pack, apart):
    """A line a structure rule reads by its shape (a bare KeyError on a lower-case name:
    a model type transformers lacks, model_requirement) that quotes a value the start was
    set to, raised by vLLM's own code: the user's choice, bad_config (held-out AIS: an
    override pooler config's lower-case 'mean'). Without the settings, or quoting a
    value no setting holds, the rule's reading stands."""
    config = ENGINE_CONFIG.replace("'AVG'", "'mean'")
    lookup = raised_in(
        "vllm/model_executor/layers/pooler.py",
        "from_config_with_defaults",
        "    pooling_type=PoolingType[pooler_config.pooling_type]",
        '  File "/usr/lib/python3.12/enum.py", line 813, in __getitem__',
        "KeyError: 'mean'",
    )
    # (blocks apart: the block scan looks the settings up before the failure's block)
    noise = [f"DEBUG 02-11 09:47:{n % 60:02d} x.py:1] {'nothing ' * 28}{n}" for n in range(2500)]
    diagnosis = both_paths([config, *(noise if apart else []), *lookup], pack)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)
    assert "pooling_type='mean'" in (diagnosis.cause or "")
    assert both_paths(lookup, pack).rule == "model-key-unknown"
    other = [config, *lookup[:-1], "KeyError: 'last'"]
    assert both_paths(other, pack).rule == "model-key-unknown"


@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_a_value_any_settings_line_of_the_attempt_logged_is_read(pack, apart):
    """V1 logs the user's arguments (``non-default args``) and then the engine's config,
    which lists no connector: a value named bare at the end of vLLM's message ("...:
    NIXLConnector") that the arguments hold is the user's choice, whichever of the
    attempt's settings lines holds it (held-out AJG, AGK)."""
    args = (
        "(APIServer pid=1) INFO 10-21 07:18:33 [utils.py:233] non-default args: "
        "{'model_tag': 'org/m', 'kv_transfer_config': KVTransferConfig("
        "kv_connector='NIXLConnector', kv_role='kv_both')}"
    )
    engine = (
        "(EngineCore_DP0 pid=2) INFO 10-21 07:18:40 [core.py:77] Initializing a V1 LLM "
        "engine (v0.11.0) with config: model='org/m', dtype=torch.bfloat16"
    )
    factory = raised_in(
        "vllm/distributed/kv_transfer/kv_connector/factory.py",
        "get_connector_class",
        "ValueError: Unsupported connector type: NIXLConnector",
    )
    noise = [f"DEBUG 10-21 07:18:{n % 60:02d} x.py:1] {'nothing ' * 28}{n}" for n in range(2500)]
    diagnosis = both_paths([args, engine, *(noise if apart else []), *factory], pack)
    assert (str(diagnosis.category), diagnosis.state) == ("bad_config", State.FAILED_PERMANENT)
    assert "kv_connector='NIXLConnector'" in (diagnosis.cause or "")
    # another attempt's arguments (before its version line) are not this one's
    again = "(APIServer pid=9) INFO 10-21 07:20:00 [api_server.py:1] vLLM API server version 0.11.0"
    later = both_paths([args, again, engine, *(noise if apart else []), *factory], pack)
    assert str(later.category) == "other"


@pytest.mark.parametrize(
    "library",
    ["triton/common/build.py", "deep_gemm/jit/compiler.py"],
    ids=["triton", "deep_gemm"],
)
def test_raised_in_a_package_vllm_called_is_not_judged_by_vllms_function(pack, library):
    """The innermost vLLM frame's raise sites say what vLLM rejects there, not what a
    third-party package it called raises: an exception raised in that package (its frame
    under vLLM's) is not vLLM's own deterministic check, nor that function's category."""
    vllm_only = raised_in(
        "vllm/model_executor/layers/quantization/fp8.py", "apply", "AssertionError: x"
    )
    assert str(both_paths(vllm_only, pack).category) == "model_requirement"
    lines = [
        "Traceback (most recent call last):",
        frame("vllm/model_executor/layers/quantization/fp8.py", "apply"),
        "    fused_kernel[grid](x)",
        frame(library, "build"),
        "AssertionError: something this package needs is missing",
    ]
    diagnosis = both_paths(lines, pack)
    assert diagnosis.category is Category.OTHER and diagnosis.permanent is False
    assert diagnosis.rule == "unhandled-exception"
