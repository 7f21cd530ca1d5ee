"""Several attempts in one log (a start retried with other settings, a crash loop): the
verdict is the last attempt's when it failed on a cause of its own, though an earlier
attempt failed first (docs/diagnostics.md, "Several attempts in one log").

An attempt begins where vLLM's API server announces a start: the markers of the pack's
``starting`` phase that capture ``server`` (its version line, V0's ``args:
Namespace(``, V1's non-default args naming ``model_tag``), one per server process. Pure:
the callers (``classify_lines``, ``diagnose``'s file reader) find the lines."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from itertools import pairwise
from types import MappingProxyType

from diagnostics.attempts.decisive import before_any_start, decisive, left_by_a_step
from diagnostics.classify.chosen import went_further
from diagnostics.classify.normalize import OWN_PREFIX, normalize
from diagnostics.classify.services import TEST_LINE
from diagnostics.model import Category, Diagnosis, State
from diagnostics.pack.matching import Regex
from diagnostics.pack.rules import Pattern, RulePack


@lru_cache(maxsize=8)
def attempt_markers(pack: RulePack) -> tuple[Pattern, ...]:
    """The pack's patterns that mark a new attempt."""
    return tuple(
        p
        for p in pack.patterns
        if p.kind == "phase"
        and pack.phases[p.owner].phase == "starting"
        and "(?P<server>" in p.regex.pattern
    )


# A line of another process than the API server (a Ray worker, an engine core, a rank)
# is not a new start, though it may echo the server's lines.
_PROCESS = re.compile(rf"^\s*{OWN_PREFIX}")


def is_attempt_line(line: str, pack: RulePack) -> bool:
    """Whether the raw ``line`` announces a new start of vLLM's API server (under a
    compose service's name too: only vLLM prints its start; not another process's)."""
    process = _PROCESS.match(line)
    if process is not None and not process.group().lstrip().startswith("(APIServer "):
        return False
    text = normalize(line)
    return any(p.regex.search(text) for p in attempt_markers(pack))


# What the model's files, fetched or copied by a step before vLLM's start, cannot cause:
# the engine's memory, the device, the image (a module it lacks). Such a failure of a
# later attempt that got further stands for the paste, though that step failed first;
# not after the image's own failure before the start (an import's: what follows is its
# consequence).
_NOT_THE_FILES = frozenset({Category.OOM, Category.KV_CACHE, Category.CUDA_FAULT})


# A test runner's id of a test it begins, at a line's start (services.TEST_LINE): a start
# after it is that test's own server.
_TEST_LINE = re.compile(f"^{TEST_LINE}", re.MULTILINE)


def another_test(text: str) -> bool:
    """Whether ``text``, the lines between an attempt's failure and a later attempt, shows
    a test runner beginning another test: the later attempt is that test's own server
    (a test session starts one per test), not a retry of the failed start, so it answers
    nothing (docs/diagnostics.md, "Several attempts in one log")."""
    return _TEST_LINE.search(text) is not None


def _of_the_image(diagnosis: Diagnosis) -> bool:
    return diagnosis.category is Category.OTHER and bool(diagnosis.permanent)


def _network_back(verdict: Diagnosis, later: Diagnosis) -> bool:
    """Whether the network was back for ``later`` (an attempt or run after ``verdict``'s
    network failure): the hub answered it (refused a gated repo), or it is loading the
    model (the files are there). (A model found missing is no answer: vLLM concludes it
    from the files it got, which the failed download may have left out.)"""
    if verdict.category is not Category.NETWORK:
        return False
    return later.category is Category.GATED_MODEL or later.state is State.LOADING


def _device_used(verdict: Diagnosis, later: Diagnosis, furthest: Callable[[], State]) -> bool:
    """Whether the last attempt, still under way, loads the model onto the device that a
    fault printed before vLLM's first start was about (a job script's "nvidia-smi:
    command not found"): vLLM found the device and got past it. Its ``furthest`` phase
    counts (asked last: the line path reads the attempt again for it): V1 downloads the
    weights inside loading, after the device is set up."""
    under_way = later.state in (State.DOWNLOADING, State.LOADING)
    return verdict.category is Category.CUDA_FAULT and under_way and furthest() is State.LOADING


def last_attempt_verdict(
    verdict: Diagnosis,
    attempt_line: int | None,
    pack: RulePack,
    classify_from: Callable[[], Diagnosis],
    attempt_before: Callable[[int], bool],
    answered: Callable[[], bool] = lambda: False,
    furthest: Callable[[], State] = lambda: State.STARTING,
) -> Diagnosis:
    """``verdict`` (the whole log's), or the last attempt's when that attempt (from the
    1-based line ``attempt_line`` on, classified by ``classify_from`` with its own line
    numbers) failed on a cause of its own and ``verdict``'s evidence belongs to an earlier
    attempt: it comes before ``attempt_line`` and after another attempt's start
    (``attempt_before(line)``), or could only come after a start (:func:`before_any_start`):
    a failure before vLLM's first start (a download step's, the image's at import) is not
    an attempt of vLLM's and stands (what vLLM then reports is its consequence), unless
    the last attempt got further and failed on what the files cannot cause, or the hub
    answered it after the network failed; the engine's memory is an attempt whose start
    the log did not keep. A last attempt that
    names no cause of its own (still under way, or ended by a consequence) keeps the
    earlier failure, unless that failure was answered before it (``answered()``:
    :func:`went_further`): then the last attempt's own state is the verdict."""
    if attempt_line is None or not verdict.failed or verdict.evidence is None:
        return verdict
    if verdict.evidence.line >= attempt_line:
        return verdict  # the failure is the last attempt's
    later = classify_from()
    if before_any_start(verdict, pack) and not attempt_before(verdict.evidence.line):
        # a failure before vLLM's first start: it stands unless the last attempt got
        # further and failed on what the files it left cannot cause, or the hub answered
        # the last attempt (refused a gated repo) after the network had failed, or the
        # last attempt loads the model onto the device a fault was about (under way)
        if _device_used(verdict, later, furthest):
            return later
        beyond = later.category in _NOT_THE_FILES or _of_the_image(later)
        back = _network_back(verdict, later)
        if _of_the_image(verdict) or not (
            decisive(later, pack) and (back or (beyond and answered()))
        ):
            return verdict
    if not decisive(later, pack) and not (attempt_before(verdict.evidence.line) and answered()):
        return verdict  # (a failure above any start: where it stopped its attempt is not known)
    if later.evidence is None:
        return later  # under way
    line = later.evidence.line + attempt_line - 1
    return later._replace(evidence=later.evidence._replace(line=line))


@lru_cache(maxsize=8)
def run_end_markers(pack: RulePack) -> tuple[Regex, ...]:
    """The pack's patterns of a platform's report that a run ended (they capture
    ``run_exit``: docker compose's "vllm-1 exited with code 1", RunPod's "worker exited
    with exit code 1", supervisord's, systemd's), after which a process or container
    restarted prints another run; and of a shell prompt printing another log (the
    ``recording`` phase: "$ kubectl logs ...", "$ docker logs ..."), another recording."""
    exits = tuple(
        rx for rule in pack.rules for rx in rule.patterns if "(?P<run_exit>" in rx.pattern
    )
    return exits + pack.recording


def is_run_end(line: str, pack: RulePack) -> bool:
    """Whether the raw ``line`` reports that a run ended."""
    text = normalize(line)
    return any(rx.search(text) for rx in run_end_markers(pack))


# Reports on consecutive lines are one end (systemd's "Main process exited"
# and "Failed with result" for one exit).
_ONE_END = 1
_RUNS_TRIED = 2
# Failures to fetch the model: a later run (or recording) that then finds no model
# (an init container's download refused, then vLLM's "Invalid repository ID or local
# directory") shows what they left, not a cause of its own.
_FETCHING = frozenset({Category.GATED_MODEL, Category.NETWORK, Category.MODEL_NOT_FOUND})
RUN_ENDS_READ = 8  # the last reports a file's reader finds (two runs' ends, those before)


def rerun_command(line: str, pack: RulePack) -> str | None:
    """The command of a raw ``line`` that is a shell prompt running vLLM's server (again),
    from the program on, its spaces collapsed; None for any other line."""
    text = normalize(line)
    for rx in pack.recording:
        if "(?P<rerun>" in rx.pattern and (found := rx.search(text)):
            return " ".join(text[text.find(found.group("rerun"), found.start()) :].split())
    return None


def after_run_ended(
    verdict: Diagnosis,
    ends: Sequence[int],
    pack: RulePack,
    classify_after: Callable[[int], Diagnosis],
    reruns: Mapping[int, str] = MappingProxyType({}),
    started_before: Callable[[int], bool] = lambda _line: True,
) -> Diagnosis:
    """``verdict``, or a later run's: ``ends`` are the 1-based lines (in order) where the
    platform reported that a run ended. A report after the verdict's evidence ended the
    run that failed so; the process or container ran again after it. The last run that
    failed on a cause of its own (:func:`decisive`; ``classify_after(line)``: the verdict
    of the lines after ``line``, numbered from 1), tried from the last end on and then
    the one before (the last run may be cut short), replaces it, whatever the earlier
    failure was (the run it belonged to had ended); but not a model found missing after
    the earlier run failed to fetch it, nor the same failure repeated (its line's message
    the same: the earlier reading, with its frames, stands). A prompt running vLLM again
    (``reruns``) does not end a failure before vLLM's first start that may come before
    one (a download step's, a copy's: :func:`before_any_start`; ``started_before(line)``:
    an attempt began before ``line``): what vLLM then reports is its consequence. A
    prompt running vLLM with another command than the failed run's (``reruns``: line ->
    command) answered that failure: the run after it, cut short or ended by a
    consequence, is the verdict by its own state; so did a restart after a network
    failure whose run is loading the model (:func:`_network_back`)."""
    if not verdict.failed or verdict.evidence is None:
        return verdict
    first = verdict.evidence.line
    after = [end for end in ends if end > first]
    if before_any_start(verdict, pack) and not (
        any(end < first for end in ends) or started_before(first)
    ):
        after = [end for end in after if end not in reruns]
    last_of_each = [e for e, then in pairwise(after) if then - e > _ONE_END] + after[-1:]
    for end in reversed(last_of_each[-_RUNS_TRIED:]):
        later = classify_after(end)
        if later.category is Category.MODEL_NOT_FOUND and verdict.category in _FETCHING:
            return verdict  # the model the earlier failure did not fetch is missing
        if decisive(later, pack):
            assert later.evidence is not None
            if normalize(later.evidence.text) == normalize(verdict.evidence.text):
                return verdict  # the same failure repeated: the fuller reading stands
        elif not (
            (end in reruns and _changed(reruns, end, first)) or _network_back(verdict, later)
        ):
            continue  # cut short or ended by a consequence, after the same command
        if later.evidence is None:
            return later  # under way, after another command or past the network's failure
        return later._replace(evidence=later.evidence._replace(line=later.evidence.line + end))
    return verdict


def _changed(reruns: Mapping[int, str], end: int, first: int) -> bool:
    """Whether the prompt on line ``end`` ran another command than the last before ``first``."""
    before = [line for line in reruns if line < first]
    return bool(before) and reruns[max(before)] != reruns[end]


def last_attempt_of_lines(
    verdict: Diagnosis,
    lines: Sequence[str],
    pack: RulePack,
    classify: Callable[[Sequence[str]], Diagnosis],
    classify_run: Callable[[Sequence[str]], Diagnosis],
    reach: Callable[[Sequence[str]], tuple[State, Mapping[str, str]]],
    furthest: Callable[[Sequence[str]], State],
) -> Diagnosis:
    """:func:`last_attempt_verdict`, then :func:`after_run_ended`, for a log held as lines
    (``classify``: a fresh classifier's verdict of some of them; ``classify_run``: of a
    later run's, knowing the log's vLLM services; ``reach``: the phase and settings a
    fresh classifier ends some of them in; ``furthest``: the furthest phase it reached)."""
    if not verdict.failed:
        return verdict
    at = next((i for i in reversed(range(len(lines))) if is_attempt_line(lines[i], pack)), None)
    begins = (
        None if at is None else next(i for i in range(at + 1) if is_attempt_line(lines[i], pack))
    )

    def started_before(line: int) -> bool:
        return begins is not None and begins < line - 1

    if at is not None:
        evidence, category = verdict.evidence, verdict.category
        verdict = last_attempt_verdict(
            verdict,
            at + 1,
            pack,
            lambda: classify(lines[at:]),
            started_before,
            lambda: (
                evidence is not None
                and not another_test("\n".join(lines[evidence.line : at]))
                and went_further(reach(lines[: evidence.line]), reach(lines[at:]), category)
            ),
            lambda: furthest(lines[at:]),
        )
    ends = [i + 1 for i, line in enumerate(lines) if is_run_end(line, pack)]
    verdict = after_run_ended(
        verdict,
        ends,
        pack,
        lambda end: classify_run(lines[end:]),
        {end: run for end in ends if (run := rerun_command(lines[end - 1], pack)) is not None},
        started_before,
    )
    if not begins:  # (lines above the first start)
        return verdict
    return left_by_a_step(verdict, begins + 1, lambda: classify(lines[:begins]), pack)
