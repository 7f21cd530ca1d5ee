"""A traceback that is another program's (a thread's, or one a caller caught and logged:
its outermost frame is no program's main, and none of its frames is vLLM's code) names
no failure once vLLM's start went on after it: Streamlit's file watcher logging its
failure on ``torch.classes`` while vLLM loads (held-out AID), a library's thread dying.
Only the last resort is forgotten so (an exception no rule names); a program's main
traceback, an IPython cell's and any traceback through vLLM's code keep the failure.
Through both paths, with the progress in the same block and blocks apart."""

from __future__ import annotations

import pytest

from diagnostics.model import State
from tests.support.packs import both_paths, shipped_pack

PACK = shipped_pack()

START = "INFO 02-10 11:02:26 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.2)"
DOWNLOADING = (
    "INFO 02-10 11:02:39 weight_utils.py:252] Using model weights format ['*.safetensors']"
)
LOADING = [
    "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:03<00:09,  3.12s/it]",
]
SITE = "/home/u/venv/lib/python3.11/site-packages"
MESSAGE = "RuntimeError: Tried to instantiate class '__path__._path', but it does not exist!"
WATCHER = [
    "2025-02-10 11:02:31.512 Examining the path of torch.classes raised:",
    "Traceback (most recent call last):",
    f'  File "{SITE}/streamlit/watcher/local_sources_watcher.py", line 217, in get_module_paths',
    "    potential_paths = extract_paths(module)",
    f'  File "{SITE}/torch/_classes.py", line 13, in __getattr__',
    "    proxy = torch._C._get_custom_class_python_wrapper(self.name, attr)",
    MESSAGE,
]
THREAD = [
    "Exception in thread Thread-3 (poll):",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner',
    "    self.run()",
    f'  File "{SITE}/gpustat_exporter/poller.py", line 88, in poll',
    "    raise OSError('device busy')",
    "OSError: device busy",
]
# the same exception ending a program's main thread, an IPython cell's, or through vLLM
SCRIPT = [
    "Traceback (most recent call last):",
    '  File "/home/u/app.py", line 12, in <module>',
    "    warm_up()",
    f'  File "{SITE}/torch/_classes.py", line 13, in __getattr__',
    MESSAGE,
]
CELL = [
    "RuntimeError                              Traceback (most recent call last)",
    "Cell In[3], line 1",
    "----> 1 warm_up()",
    f"File {SITE}/torch/_classes.py:13, in __getattr__(self, attr)",
    MESSAGE,
]
THROUGH_VLLM = [
    "Exception in thread Thread-3 (poll):",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.11/threading.py", line 1045, in _bootstrap_inner',
    f'  File "{SITE}/vllm/worker/model_runner.py", line 1110, in load_model',
    f'  File "{SITE}/torch/_classes.py", line 13, in __getattr__',
    MESSAGE,
]
# ~0.6 MB of lines nothing reads: the failure's block and the progress's blocks apart
NOISE = [
    f"DEBUG 02-10 11:02:{n % 60:02d} some_module.py:1] {'nothing ' * 28}{n}" for n in range(2500)
]


@pytest.mark.parametrize("traceback", [WATCHER, THREAD], ids=["logged", "thread"])
@pytest.mark.parametrize("apart", [False, True], ids=["same-block", "blocks-apart"])
def test_another_programs_traceback_then_vllm_going_on_is_a_start_under_way(traceback, apart):
    lines = [START, DOWNLOADING, *traceback, *(NOISE if apart else []), *LOADING]
    assert both_paths(lines, PACK).state is State.LOADING


@pytest.mark.parametrize("traceback", [WATCHER, THREAD], ids=["logged", "thread"])
def test_it_still_ends_a_start_that_went_no_further(traceback):
    diagnosis = both_paths([START, DOWNLOADING, *traceback], PACK)
    assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "other")


@pytest.mark.parametrize(
    "traceback", [SCRIPT, CELL, THROUGH_VLLM], ids=["script", "ipython-cell", "through-vllm"]
)
def test_a_main_a_cell_or_vllms_own_traceback_keeps_the_failure(traceback):
    # a program's main thread ended there (the lines after it were pasted after it, or
    # are another process's); a traceback through vLLM's code is vLLM's own
    diagnosis = both_paths([START, DOWNLOADING, *traceback, *LOADING], PACK)
    assert diagnosis.state is State.FAILED_TRANSIENT
    assert diagnosis.evidence is not None and diagnosis.evidence.text == MESSAGE


def test_a_cause_a_rule_names_is_not_forgotten():
    # only the last resort is: a CUDA error in another program's thread still decides
    cuda = [*THREAD[:-1], "RuntimeError: CUDA error: an illegal memory access was encountered"]
    diagnosis = both_paths([START, DOWNLOADING, *cuda, *LOADING], PACK)
    assert (diagnosis.state, str(diagnosis.category)) == (State.FAILED_TRANSIENT, "cuda_fault")
