"""A finding whose rule is forgotten when the start goes on (``when: {until_progress:
true}``: a hub request retried, a download that stalled) names no failure once the start
reached a later phase: a log that ends there is a start under way, and a failure after
it is judged without it. Through both paths (the worker's lines, diagnose's block scan),
with the progress in the same block and blocks apart."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths, shipped_pack

PACK = shipped_pack()

RETRIED = [
    "'(ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Read timed "
    "out. (read timeout=10)\"), '(Request ID: 3f9b1c7e)')' thrown while requesting HEAD "
    "https://huggingface.co/org/model/resolve/main/config.json",
    "Retrying in 1s [Retry 1/5].",
]
STALLED = [
    "model-00002-of-00004.safetensors:  41%|████      | 2.05G/4.98G [09:41<???, 0.00B/s]",
]
DOWNLOADING = (
    "INFO 05-02 11:00:30 weight_utils.py:243] Using model weights format ['*.safetensors']"
)
LOADING = [
    "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:02<00:07,  2.61s/it]",
]
START = "INFO 05-02 11:00:01 api_server.py:177] vLLM API server version 0.6.3"
ENGINE_FAILED = "RuntimeError: Engine core initialization failed. See root cause above."
NOISE = [
    f"DEBUG 05-02 11:00:{n % 60:02d} some_module.py:1] a line of nothing {n}" for n in range(30000)
]


@pytest.mark.parametrize("finding", [RETRIED, STALLED], ids=["retried", "stalled"])
@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_a_start_that_went_on_past_it_is_under_way(finding, apart):
    lines = [START, DOWNLOADING, *finding, *(NOISE if apart else []), *LOADING]
    assert both_paths(lines, PACK).state is State.LOADING


@pytest.mark.parametrize("finding", [RETRIED, STALLED], ids=["retried", "stalled"])
def test_it_still_ends_a_start_that_went_no_further(finding):
    # more of the same phase after it (the download still at it) is no progress
    diagnosis = both_paths([START, DOWNLOADING, *finding, DOWNLOADING], PACK)
    assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "network")


def test_a_failure_after_the_start_went_on_is_judged_without_it():
    diagnosis = both_paths([START, DOWNLOADING, *RETRIED, *LOADING, ENGINE_FAILED], PACK)
    assert diagnosis.rule == "engine-wrapper"
    assert diagnosis.state is State.FAILED_TRANSIENT


def test_a_rule_without_the_mark_is_not_forgotten_by_progress():
    cause = "OSError: [Errno 28] No space left on device"
    diagnosis = both_paths([START, DOWNLOADING, cause, *LOADING], PACK)
    assert diagnosis.rule == "disk-full"


# huggingface_hub's notice of a download it resumes, printed bare (its handler prints no
# level): the socket's words in a message, not raised (held-out VW)
RESUMED = [
    "Error while downloading from https://cdn-lfs-us-1.hf.co/repos/8e/1a/x?filename=model-"
    "00015-of-00037.safetensors: HTTPSConnectionPool(host='cdn-lfs-us-1.hf.co', port=443): "
    "Read timed out.",
    "Trying to resume download...",
]


@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_the_sockets_words_then_a_later_phase_are_a_start_under_way(apart):
    lines = [START, DOWNLOADING, *RESUMED, *(NOISE if apart else []), *LOADING]
    assert both_paths(lines, PACK).state is State.LOADING


def test_the_sockets_words_then_more_of_the_same_phase_are_the_network():
    # the download still at it (or its bars going on) is no later phase
    bars = ["model-00015-of-00037.safetensors:  31%|███       | 1.23G/3.96G [00:20<00:21, 108MB/s]"]
    for after in ([], [DOWNLOADING], bars):
        diagnosis = both_paths([START, DOWNLOADING, *RESUMED, *after], PACK)
        assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "network")
    # and a failure after the later phase is judged without them
    failed = both_paths([START, DOWNLOADING, *RESUMED, *LOADING, ENGINE_FAILED], PACK)
    assert failed.rule == "engine-wrapper"


# a request a library logged as failed under its own logger's header, below ERROR
# (LMCache's usage report; held-out AGM, stop 61), not raised: the start went on past it
WARNED = {
    "lmcache": "[2025-10-14 09:13:03,402] LMCache WARNING: Failed to send usage data to "
    "server: HTTPSConnectionPool(host='lmcache.ai', port=443): Max retries exceeded with "
    "url: /endpoint (Caused by NameResolutionError(\"Failed to resolve 'lmcache.ai'\"))",
    "python": "WARNING:some_library.telemetry:Max retries exceeded with url: /api/report",
    "dashes": "2025-10-14 09:13:03,402 - telemetry - WARNING - Max retries exceeded with url: /r",
}


@pytest.mark.parametrize("header", sorted(WARNED))
@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_a_network_failure_logged_as_a_warning_then_a_later_phase_is_survived(header, apart):
    lines = [START, WARNED[header], *(NOISE if apart else []), DOWNLOADING, *LOADING]
    assert both_paths(lines, PACK).state is State.LOADING


@pytest.mark.parametrize("header", sorted(WARNED))
def test_a_network_failure_logged_as_a_warning_still_ends_a_start_that_went_no_further(header):
    diagnosis = both_paths([START, WARNED[header]], PACK)
    assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "network")


def test_a_network_failure_logged_as_an_error_is_not_outgrown():
    error = WARNED["lmcache"].replace("LMCache WARNING:", "LMCache ERROR:")
    diagnosis = both_paths([START, error, DOWNLOADING, *LOADING], PACK)
    assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "network")


# a setting vLLM warned of and accepted (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: max_model_len
# above the model's own, logged as a warning; without the override it is raised): the
# start went on past it (held-out AME, stop 65: a start still loading read as bad_config)
LONG_LEN = (
    "User-specified max_model_len (65536) is greater than the derived max_model_len "
    "(max_position_embeddings=32768 or model_max_length=None in model's config.json)."
)


@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_a_setting_vllm_warned_of_then_a_later_phase_is_a_start_under_way(apart):
    warning = f"WARNING 05-06 13:02:58 [config.py:3220] {LONG_LEN}"
    lines = [START, warning, *(NOISE if apart else []), DOWNLOADING, *LOADING]
    assert both_paths(lines, PACK).state is State.LOADING


def test_the_same_setting_raised_or_with_no_later_phase_ends_the_start():
    raised = f"ValueError: {LONG_LEN} To allow overriding this maximum, set the env var"
    warning = f"WARNING 05-06 13:02:58 [config.py:3220] {LONG_LEN}"
    for lines in ([START, raised, DOWNLOADING, *LOADING], [START, warning]):
        diagnosis = both_paths(lines, PACK)
        assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_PERMANENT, "bad_config")


# vLLM's look at the repo's safetensors metadata (0.9.1 on) logs each failure at ERROR and
# goes on without it, whatever the reason: a local folder read as a repo id, a gated repo,
# the hub unreachable (rules/30-hub.yaml safetensors-lookup-notice).
NOTICES = {
    "local folder": "(APIServer pid=1) ERROR 08-14 09:51:30 [config.py:130] Error retrieving "
    "safetensors: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
    "'/models/gpt-oss-120b'. Use `repo_type` argument if needed., retrying 1 of 2",
    "gated": "(APIServer pid=1) ERROR 08-14 09:51:30 [config.py:128] Error retrieving "
    "safetensors: 401 Client Error. (Request ID: Root=1-68a2) Cannot access gated repo for "
    "url https://huggingface.co/api/models/org/model/revision/main.",
    "timeout": "(APIServer pid=1) WARNING 08-14 09:51:30 [utils.py:118] Error retrieving "
    "safetensors: (ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): "
    'Read timed out. (read timeout=10)"))',
}
V1_START = (
    "(APIServer pid=1) INFO 08-14 09:51:23 [api_server.py:1805] vLLM API server version 0.10.1.1"
)
V1_LOADING = [
    "(VllmWorker TP0 pid=339) INFO 08-14 09:51:46 [gpu_model_runner.py:1953] Starting to load "
    "model /models/gpt-oss-120b...",
    "Loading safetensors checkpoint shards:  33% Completed | 5/15 [00:06<00:13,  1.33s/it]",
]
HARMONY = [
    '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/'
    'harmony_utils.py", line 46, in get_encoding',
    "(APIServer pid=1) openai_harmony.HarmonyError: error downloading or loading vocab file: "
    "failed to download or load vocab file",
]
ARCH = [
    "(EngineCore_0 pid=271) ValueError: Model architectures ['FooForCausalLM'] are not "
    "supported for now.",
]


@pytest.mark.parametrize("notice", list(NOTICES), ids=list(NOTICES))
def test_the_safetensors_lookup_notice_then_loading_is_a_start_under_way(notice):
    lines = [V1_START, NOTICES[notice], *V1_LOADING]
    assert both_paths(lines, PACK).state is State.LOADING


@pytest.mark.parametrize("notice", list(NOTICES), ids=list(NOTICES))
@pytest.mark.parametrize(
    ("after", "category", "permanent"),
    [(HARMONY, "network", False), (ARCH, "model_requirement", True)],
    ids=["harmony-vocab", "architecture"],
)
@pytest.mark.parametrize("went_on", [False, True], ids=["same-phase", "after-loading"])
def test_a_cause_after_the_safetensors_lookup_notice_decides(
    notice, after, category, permanent, went_on
):
    lines = [V1_START, NOTICES[notice], *(V1_LOADING if went_on else []), *after]
    diagnosis = both_paths(lines, PACK)
    assert (str(diagnosis.category), diagnosis.permanent) == (category, permanent)
    assert diagnosis.rule != "safetensors-lookup-notice"


def test_the_safetensors_lookup_notice_alone_is_the_network_not_a_missing_model():
    diagnosis = both_paths([V1_START, NOTICES["local folder"]], PACK)
    assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "network")


# huggingface_hub's notice of a download cut, whatever the error it names (a read
# timeout, the connection broken mid-body: IncompleteRead), then the same file's bar
# past where it stopped: http_get resumed it (held-out AJU, read as a truncated file)
CUT = {
    "read-timeout": "HTTPSConnectionPool(host='cdn-lfs-us-1.hf.co', port=443): Read timed out.",
    "incomplete-read": "('Connection broken: IncompleteRead(1795162112 bytes read, "
    "1118438400 more expected)', IncompleteRead(1795162112 bytes read, 1118438400 more expected))",
}
BAR = "model-00004-of-00030.safetensors:  {}%|██████    | 2.84G/4.66G [01:03<00:41, 44.1MB/s]"


@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
@pytest.mark.parametrize("error", list(CUT))
def test_a_download_resumed_past_where_it_was_cut_is_under_way(error, apart):
    cut = [
        f"Error while downloading from https://cdn-lfs-us-1.hf.co/repos/7b/1c/x?filename=model-"
        f"00004-of-00030.safetensors: {CUT[error]}",
        "Trying to resume download...",
    ]
    before = [START, DOWNLOADING, BAR.format(61), *cut]
    assert both_paths(before, PACK).state is State.FAILED_TRANSIENT  # (alone: the network)
    lines = [*before, *(NOISE if apart else []), BAR.format(100)]
    assert both_paths(lines, PACK).state is State.DOWNLOADING
