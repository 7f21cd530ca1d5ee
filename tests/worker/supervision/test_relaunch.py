"""The relaunch decision (worker/supervision/relaunch.py) as a table, without processes:
what each failure calls for, what never relaunches, the limit of two, and applying the
changes to vLLM's arguments and environment."""

from __future__ import annotations

from dataclasses import replace

import pytest

from diagnostics import Category, Diagnosis, Evidence, State
from tests.support.packs import shipped_pack
from worker.supervision import relaunch as rl
from worker.supervision import relaunch_apply as rla
from worker.supervision.relaunch import Context, Failure, decide

PACK = shipped_pack()
VOLUME_CACHE = "/runpod-volume/vllm-cache"
LOCAL_CACHE = "/tmp/vllm-cache"
# The most a relaunch could ask for: every condition of every kind holds.
WILLING = Context(
    max_model_len_auto=True,
    max_model_len=None,
    revision="v2-preview",
    cache_root=VOLUME_CACHE,
    local_cache_root=LOCAL_CACHE,
    weights_fit=True,
)
KV_LINE = (
    "ValueError: To serve at least one request with the model's max seq len (2048), (0.0 GiB "
    "KV cache is needed, which is larger than the available KV cache memory (0.0 GiB). Based "
    "on the available memory, the estimated maximum model length is 768. Try increasing "
    "`gpu_memory_utilization`"
)
OOM_LINE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a "
    "total capacity of 79.19 GiB of which 77.44 MiB is free. Including non-PyTorch memory, "
    "this process has 71.81 GiB memory in use."
)
DISK_LINE = f"OSError: [Errno 28] No space left on device: '{VOLUME_CACHE}/torch_compile_cache/x'"
REV_LINE = (
    "v2-preview is not a valid git identifier (branch name, tag name or commit id) that "
    "exists for this model name."
)


def _failure(rule_id: str, line: str, phase: State = State.LOADING) -> Failure:
    rule = PACK.by_id(rule_id)
    diagnosis = Diagnosis(
        State.FAILED_PERMANENT if rule.permanent else State.FAILED_TRANSIENT,
        rule.category,
        rule.id,
        Evidence(10, line),
    )
    return rla.failure_of(diagnosis, PACK, phase)


def test_captures_are_read_again_from_the_evidence():
    assert _failure("kv-cache-too-small-for-max-len", KV_LINE).captures["fit"] == "768"
    assert _failure("repo-not-found", REV_LINE).captures["rev"] == "v2-preview"


@pytest.mark.parametrize(
    ("rule", "line", "phase", "context", "changes"),
    [
        pytest.param(
            "kv-cache-too-small-for-max-len", KV_LINE, State.LOADING, WILLING,
            {"MAX_MODEL_LEN": "768"}, id="auto-length-at-vllm's-estimate",
        ),
        pytest.param(
            "kv-cache-too-small-for-max-len", KV_LINE, State.LOADING,
            replace(WILLING, max_model_len_auto=False), None, id="a-length-set-stays-permanent",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING, WILLING,
            {"ENFORCE_EAGER": "true", "MAX_NUM_BATCHED_TOKENS": "8192"}, id="oom-after-weights",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING,
            replace(WILLING, max_num_batched_tokens=4096),
            {"ENFORCE_EAGER": "true", "MAX_NUM_BATCHED_TOKENS": "4096"}, id="oom-keeps-smaller",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING,
            replace(WILLING, user_set=frozenset({"ENFORCE_EAGER"})),
            {"MAX_NUM_BATCHED_TOKENS": "8192"}, id="oom-user-eager-kept",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING,
            replace(WILLING, user_set=frozenset({"ENFORCE_EAGER", "MAX_NUM_BATCHED_TOKENS"})),
            None, id="oom-user-set-both",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING, replace(WILLING, auto_relax=False),
            None, id="oom-auto-relax-off",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING, replace(WILLING, weights_fit=False),
            None, id="oom-weights-cannot-fit",
        ),
        pytest.param(
            "cuda-oom-allocate", OOM_LINE, State.LOADING, replace(WILLING, weights_fit=None),
            None, id="oom-weights-unknown",
        ),
        pytest.param(
            "cuda-oom", "torch.OutOfMemoryError", State.STARTING, WILLING, None,
            id="oom-before-loading",
        ),
        pytest.param(
            "repo-not-found", REV_LINE, State.STARTING, WILLING, {"MODEL_REVISION": ""},
            id="revision-vanished",
        ),
        pytest.param(
            "repo-not-found", REV_LINE, State.STARTING, replace(WILLING, revision_pinned=True),
            None, id="revision-pinned",
        ),
        pytest.param(
            "repo-not-found", REV_LINE.replace("v2-preview", "main"), State.STARTING,
            replace(WILLING, revision="main"), None, id="default-branch-vanished",
        ),
        pytest.param(
            "repo-not-found", "Repository Not Found for url", State.STARTING, WILLING, None,
            id="repo-missing",
        ),
        pytest.param(
            "disk-full", DISK_LINE, State.LOADING, WILLING, {"VLLM_CACHE_ROOT": LOCAL_CACHE},
            id="compile-cache-volume-full",
        ),
        pytest.param(
            "disk-full", "OSError: [Errno 28] No space left on device", State.DOWNLOADING,
            WILLING, None, id="disk-full-elsewhere",
        ),
        pytest.param(
            "disk-full", DISK_LINE, State.LOADING, replace(WILLING, cache_root=LOCAL_CACHE),
            None, id="cache-already-local",
        ),
    ],
)  # fmt: skip
def test_the_decision_table(rule, line, phase, context, changes):
    found = decide(_failure(rule, line, phase), context)
    assert (found.changes if found else None) == changes
    if found is not None:
        assert found.reason and found.kind


def test_at_most_two_relaunches_and_each_kind_once():
    oom = _failure("cuda-oom-allocate", OOM_LINE)
    assert decide(oom, replace(WILLING, done=("revision",))) is not None
    assert decide(oom, replace(WILLING, done=("relax",))) is None
    assert decide(oom, replace(WILLING, done=("revision", "compile_cache"))) is None
    assert decide(oom, replace(WILLING, breaker_allows=False)) is None


NEVER_CATEGORIES = sorted((rule.id for rule in PACK.rules if rule.category in rl.NEVER), key=str)


@pytest.mark.parametrize("rule_id", NEVER_CATEGORIES)
def test_faults_and_permanent_errors_never_relaunch(rule_id):
    """A device fault, a gated model, custom code, a configuration or model error: no
    relaunch, however willing the context and whatever the captures say."""
    rule = PACK.by_id(rule_id)
    failure = Failure(
        rule.id,
        rule.category,
        rule.permanent,
        {"fit": "768", "rev": "v2-preview", "len": "2048"},
        State.LOADING,
        DISK_LINE,
    )
    assert decide(failure, WILLING) is None


@pytest.mark.parametrize(
    "line",
    [
        "Repository Not Found for url: https://huggingface.co/api/models/org/none",
        "org/none is not a local folder and is not a valid model identifier",
        "404 Client Error: Not Found for url: https://huggingface.co/org/none/resolve/main/config.json",
    ],
)
def test_a_missing_model_never_relaunches(line):
    assert decide(_failure("repo-not-found", line, State.STARTING), WILLING) is None


def test_no_rule_other_than_the_four_kinds_relaunches():
    willing = [r.id for r in PACK.rules if r.category not in rl.NEVER]
    relaunching = {
        rule_id
        for rule_id in willing
        if decide(
            Failure(rule_id, PACK.by_id(rule_id).category, True, {"fit": "768"}, State.LOADING),
            WILLING,
        )
    }
    assert relaunching <= rl.KV_SHORTFALL | rl.OUT_OF_MEMORY


def test_apply_replaces_flags_and_environment():
    args = ["--model", "m", "--max-model-len", "auto", "--revision=v2", "--no-enforce-eager"]
    changes = {
        "MAX_MODEL_LEN": "768",
        "MODEL_REVISION": "",
        "ENFORCE_EAGER": "true",
        "VLLM_CACHE_ROOT": LOCAL_CACHE,
    }
    new_args, env = rla.apply(args, {"VLLM_CACHE_ROOT": VOLUME_CACHE}, changes)
    assert new_args == ["--model", "m", "--max-model-len", "768", "--enforce-eager"]
    assert env == {"VLLM_CACHE_ROOT": LOCAL_CACHE}


def test_context_reads_what_the_user_set(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("max-num-batched-tokens: 2048\n")
    user = ["--max-model-len", "auto", "--enforce-eager", "--config", str(config)]
    context = rla.context_of(
        user,
        [*user, "--max-model-len", "512"],
        {"VLLM_CACHE_ROOT": VOLUME_CACHE},
        auto_relax=True,
        weights_fit=True,
        done=(),
        breaker_allows=True,
    )
    assert context.max_model_len_auto and context.max_model_len == 512
    assert context.user_set == {"MAX_MODEL_LEN", "ENFORCE_EAGER", "MAX_NUM_BATCHED_TOKENS"}
    assert context.cache_root == VOLUME_CACHE


@pytest.mark.parametrize(
    ("revision", "pin"),
    [("main", False), ("v2-preview", False), ("0123abcd", True), ("a" * 40, True), (None, False)],
)
def test_a_commit_is_a_pin(revision, pin):
    assert rl.pinned(revision) is pin


def test_auto_length_on_a_vllm_without_auto(monkeypatch):
    args = ["--max-model-len", "auto"]
    assert rla.vllm_has_auto()  # vLLM 0.32 fits the length itself: nothing to do
    assert rla.auto_length(args, {"max_model_len_fit": 976}) is None
    monkeypatch.setattr(rla, "vllm_has_auto", lambda: False)
    assert rla.auto_length(args, {"max_model_len_fit": 976}).changes == {"MAX_MODEL_LEN": "976"}
    assert rla.auto_length(args, None).changes == {"MAX_MODEL_LEN": ""}
    assert rla.auto_length(["--max-model-len", "512"], {"max_model_len_fit": 976}) is None


def test_categories_never_relaunched_are_the_faults_and_permanent_errors():
    assert {Category.CUDA_FAULT, Category.GATED_MODEL, Category.BAD_CONFIG} <= rl.NEVER


# -- what the worker states: the pre-flight's plan (worker/preflight/plan.py) and the
#    length in force in the load-balancing health body


def _tiny_facts():
    from worker.modelinfo.facts import ModelFacts

    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 64, "intermediate_size": 256, "vocab_size": 350,
        "max_position_embeddings": 2048, "torch_dtype": "float32",
    }  # fmt: skip
    return ModelFacts("local", config, {"model.safetensors": 1_540_000}, local=True)


def _cpu():
    from worker.seams.gpus import HostMemory, Inventory

    return Inventory(host=HostMemory(16 << 30, 12 << 30))


def test_the_plan_states_the_calibrated_numbers_and_the_concurrency():
    from worker.preflight import plan
    from worker.preflight.request import read_request

    req = read_request(["--kv-cache-memory-bytes", "1000000", "--dtype", "float32"], "m")
    rows = []

    def estimator(row):
        rows.append(row)
        return {"weights_gib": 0.0014, "kv_cache_tokens": 976, "max_model_len_fit": 976}

    stated = plan.plan(_tiny_facts(), req, _cpu(), "cpu", 2048, estimator=estimator)
    assert stated is not None
    assert stated["source"] == "calibrated" and stated["max_model_len_fit"] == 976
    assert stated["max_model_len"] == 2048 and stated["concurrency"] == round(976 / 2048, 2)
    assert stated["weights_fit"] is True
    row = rows[0]
    assert row["kv_cache_memory_bytes"] == 1000000 and row["gpu"]["total_memory_gib_printed"] == 16
    assert row["config"]["num_hidden_layers"] == 2


def test_without_the_estimator_the_plan_is_the_conservative_count():
    from worker.preflight import plan
    from worker.preflight.request import read_request

    args = ["--max-model-len", "auto", "--kv-cache-memory-bytes", "1000000", "--dtype", "float32"]
    req = read_request(args, "m")
    assert req.max_model_len_auto and req.max_model_len is None

    def broken(row):
        raise ValueError("no estimate")

    stated = plan.plan(_tiny_facts(), req, _cpu(), "cpu", 2048, estimator=broken)
    assert stated is not None and stated["source"] == "conservative"
    assert stated["estimate_error"] == "no estimate"
    assert stated["kv_cache_tokens"] == 896 and stated["max_model_len"] is None  # 7 x 128
    assert "concurrency" not in stated  # auto: no configured length


def test_amounts_do_not_round_away():
    from worker.preflight.plan import amount

    assert amount(2 << 30) == "2.00 GiB"
    assert amount(1_000_000) == "0.95 MiB"
    assert amount(2048) == "2.00 KiB"


def test_the_health_body_says_the_length_in_force():
    import json as _json

    from worker.lb.health import health

    answer = health(State.READY, {"max_model_len": 768})
    assert _json.loads(answer.body) == {"state": "ready", "max_model_len": 768}
    assert _json.loads(health(State.READY).body) == {"state": "ready"}
    assert health(State.LOADING, {"max_model_len": 768}).status == 204
