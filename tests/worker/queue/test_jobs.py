"""Job input -> ProxyRequest: every accepted shape, every refusal, and no crash on any JSON."""

from __future__ import annotations

import copy
import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import tiers
from worker.queue.jobs import ACCEPTED_SHAPES, BadInput, ProxyRequest, to_request

MODEL = "served/model"
MSGS = [{"role": "user", "content": "hi"}]


def post(path: str, body: dict, stream: bool = False) -> ProxyRequest:
    return ProxyRequest("POST", path, body, stream)


def get(path: str) -> ProxyRequest:
    return ProxyRequest("GET", path, None, False)


ACCEPTED = [
    # -- OpenAI passthrough, as the gateway sends it
    (
        "openai chat fills model",
        {"openai_route": "/v1/chat/completions", "openai_input": {"messages": MSGS}},
        post("/v1/chat/completions", {"messages": MSGS, "model": MODEL}),
    ),
    (
        "openai keeps the caller's model",
        {"openai_route": "/v1/completions", "openai_input": {"model": "lora-a", "prompt": "x"}},
        post("/v1/completions", {"model": "lora-a", "prompt": "x"}),
    ),
    (
        "openai null model is filled",
        {"openai_route": "/v1/completions", "openai_input": {"model": None, "prompt": "x"}},
        post("/v1/completions", {"model": MODEL, "prompt": "x"}),
    ),
    (
        "openai stream true streams",
        {
            "openai_route": "/v1/chat/completions",
            "openai_input": {"messages": MSGS, "stream": True},
        },
        post("/v1/chat/completions", {"messages": MSGS, "stream": True, "model": MODEL}, True),
    ),
    (
        "openai stream as the string true streams, as vLLM's pydantic model reads it",
        {"openai_route": "/v1/completions", "openai_input": {"prompt": "x", "stream": "true"}},
        post("/v1/completions", {"prompt": "x", "stream": "true", "model": MODEL}, True),
    ),
    (
        "openai stream that vLLM refuses is sent as is, not streamed (vLLM answers 400)",
        {"openai_route": "/v1/completions", "openai_input": {"prompt": "x", "stream": "maybe"}},
        post("/v1/completions", {"prompt": "x", "stream": "maybe", "model": MODEL}),
    ),
    ("openai bare route is a GET", {"openai_route": "/v1/models"}, get("/v1/models")),
    (
        "openai empty input is a GET",
        {"openai_route": "/v1/models", "openai_input": {}},
        get("/v1/models"),
    ),
    (
        "openai null input is a GET",
        {"openai_route": "/v1/models", "openai_input": None},
        get("/v1/models"),
    ),
    (
        "openai responses route passes through",
        {"openai_route": "/v1/responses", "openai_input": {"input": "x"}},
        post("/v1/responses", {"input": "x", "model": MODEL}),
    ),
    (
        "anthropic-style messages route passes through",
        {"openai_route": "/v1/messages", "openai_input": {"messages": MSGS, "max_tokens": 5}},
        post("/v1/messages", {"messages": MSGS, "max_tokens": 5, "model": MODEL}),
    ),
    # -- generic
    ("route alone is a GET", {"route": "/v1/models"}, get("/v1/models")),
    (
        "route with body is a POST",
        {"route": "/v1/embeddings", "body": {"input": "x"}},
        post("/v1/embeddings", {"input": "x", "model": MODEL}),
    ),
    (
        "method is case-insensitive",
        {"route": "/v1/completions", "method": "post", "body": {"prompt": "x", "stream": True}},
        post("/v1/completions", {"prompt": "x", "stream": True, "model": MODEL}, True),
    ),
    ("explicit GET", {"route": "/v1/models", "method": "GET"}, get("/v1/models")),
    (
        "POST without body sends none",
        {"route": "/v1/load", "method": "POST"},
        ProxyRequest("POST", "/v1/load", None, False),
    ),
    ("null body is no body", {"route": "/v1/models", "body": None}, get("/v1/models")),
    # -- standard
    (
        "prompt -> completions",
        {"prompt": "Once"},
        post("/v1/completions", {"prompt": "Once", "model": MODEL}),
    ),
    (
        "messages -> chat completions",
        {"messages": MSGS},
        post("/v1/chat/completions", {"messages": MSGS, "model": MODEL}),
    ),
    (
        "messages win over prompt",
        {"messages": MSGS, "prompt": "ignored"},
        post("/v1/chat/completions", {"messages": MSGS, "model": MODEL}),
    ),
    (
        "apply_chat_template sends the prompt as one user message",
        {"prompt": "hi", "apply_chat_template": True},
        post("/v1/chat/completions", {"messages": MSGS, "model": MODEL}),
    ),
    (
        "apply_chat_template false keeps completions",
        {"prompt": "hi", "apply_chat_template": False},
        post("/v1/completions", {"prompt": "hi", "model": MODEL}),
    ),
    (
        "sampling_params are merged into the body",
        {"prompt": "x", "sampling_params": {"max_tokens": 8, "temperature": 0}},
        post("/v1/completions", {"max_tokens": 8, "temperature": 0, "prompt": "x", "model": MODEL}),
    ),
    (
        "sampling_params may pick a model (a LoRA adapter)",
        {"messages": MSGS, "sampling_params": {"model": "lora-b"}},
        post("/v1/chat/completions", {"model": "lora-b", "messages": MSGS}),
    ),
    (
        "stream true",
        {"messages": MSGS, "stream": True},
        post("/v1/chat/completions", {"messages": MSGS, "stream": True, "model": MODEL}, True),
    ),
    (
        "stream false adds nothing",
        {"prompt": "x", "stream": False},
        post("/v1/completions", {"prompt": "x", "model": MODEL}),
    ),
    (
        "an empty message list is vLLM's to judge",
        {"messages": []},
        post("/v1/chat/completions", {"messages": [], "model": MODEL}),
    ),
]


@pytest.mark.parametrize(
    ("job_input", "expected"),
    [pytest.param(i, e, id=name) for name, i, e in ACCEPTED],
)
def test_accepted_shapes(job_input: dict, expected: ProxyRequest) -> None:
    before = copy.deepcopy(job_input)
    assert to_request(job_input, MODEL) == expected
    assert job_input == before, "to_request must not mutate the job's input"


REFUSED = [
    # (name, input, words the message must contain)
    ("not an object: list", [1, 2], "must be a JSON object, got an array"),
    ("not an object: string", "hello", "got a string"),
    ("not an object: null", None, "got null"),
    ("empty object", {}, "keys found: none"),
    ("unknown shape", {"text": "hi"}, "keys found: text"),
    ("top-level max_tokens", {"prompt": "x", "max_tokens": 5}, "inside sampling_params"),
    ("mixed openai and prompt", {"openai_route": "/v1/models", "prompt": "x"}, "prompt"),
    ("mixed route and messages", {"route": "/v1/models", "messages": MSGS}, "messages"),
    ("openai_input a list", {"openai_route": "/v1/x", "openai_input": []}, "openai_input"),
    ("openai_input a string", {"openai_route": "/v1/x", "openai_input": "{}"}, "openai_input"),
    ("openai_route not a string", {"openai_route": 5}, "openai_route must be a string"),
    ("body a list", {"route": "/v1/x", "body": [1]}, "body must be a JSON object"),
    ("method PUT", {"route": "/v1/x", "method": "PUT"}, 'GET, POST, got "PUT"'),
    ("method DELETE", {"route": "/v1/x", "method": "DELETE"}, "method must be one of"),
    ("method a number", {"route": "/v1/x", "method": 1}, "got a number"),
    ("GET with body", {"route": "/v1/x", "method": "GET", "body": {}}, "GET request takes no"),
    ("messages a string", {"messages": "hi"}, "messages must be a list"),
    ("messages of strings", {"messages": ["hi"]}, "list of message objects"),
    ("prompt a number", {"prompt": 3}, "prompt must be a string"),
    ("prompt a list", {"prompt": ["a", "b"]}, "prompt must be a string, got an array"),
    ("sampling_params a list", {"prompt": "x", "sampling_params": []}, "sampling_params must"),
    ("sampling_params sets prompt", {"prompt": "x", "sampling_params": {"prompt": "y"}}, "prompt"),
    (
        "sampling_params sets stream",
        {"prompt": "x", "sampling_params": {"stream": True}},
        "top-level input keys",
    ),
    ("stream a string", {"prompt": "x", "stream": "yes"}, "stream must be true or false"),
    ("apply_chat_template 1", {"prompt": "x", "apply_chat_template": 1}, "apply_chat_template"),
    ("NaN in the body", {"prompt": "x", "sampling_params": {"top_p": math.nan}}, "strict JSON"),
    (
        "Infinity in openai input",
        {"openai_route": "/v1/x", "openai_input": {"a": math.inf}},
        "JSON",
    ),
]


@pytest.mark.parametrize(
    ("job_input", "words"), [pytest.param(i, w, id=name) for name, i, w in REFUSED]
)
def test_refused_inputs_say_what_and_list_the_shapes(job_input: object, words: str) -> None:
    with pytest.raises(BadInput) as caught:
        to_request(job_input, MODEL)
    assert words in caught.value.problem
    assert caught.value.message.endswith(ACCEPTED_SHAPES)
    assert str(caught.value) == caught.value.message


BAD_ROUTES = [
    "/health",
    "/v2/models",
    "v1/models",
    "/v1",
    "/v1/",
    "/v1/models/",
    "/v1//models",
    "/v1/../health",
    "/v1/./models",
    "/v1/models/..",
    "/v1/%2e%2e/health",
    "/v1/models?limit=1",
    "/v1/models#x",
    "/v1/chat completions",
    "http://evil.example/v1/models",
    "//evil.example/v1/models",
    "/v1/models\n",
    "/v1/m\u00e9",
    "/v1/" + "a" * 300,
    "",
]


@pytest.mark.parametrize("route", BAD_ROUTES)
@pytest.mark.parametrize("key", ["openai_route", "route"])
def test_routes_outside_plain_v1_paths_are_refused(key: str, route: str) -> None:
    with pytest.raises(BadInput, match=f"{key} must be a plain path under /v1/"):
        to_request({key: route}, MODEL)


@pytest.mark.parametrize(
    "route", ["/v1/models", "/v1/chat/completions", "/v1/responses/resp_1-a.b~c", "/v1/audio/x"]
)
def test_plain_v1_routes_pass(route: str) -> None:
    assert to_request({"route": route}, MODEL).path == route


# Realistic values for every key a shape in the refusal may name.
_EXAMPLE = {
    "openai_route": "/v1/chat/completions",
    "openai_input": {"messages": [{"role": "user", "content": "hi"}]},
    "route": "/v1/completions",
    "method": "POST",
    "body": {"prompt": "hi"},
    "messages": [{"role": "user", "content": "hi"}],
    "prompt": "hi",
    "sampling_params": {"max_tokens": 4},
    "stream": False,
    "apply_chat_template": True,
}


def test_a_refusal_names_the_problem_then_shapes_that_are_accepted() -> None:
    """The message is checked for being true, not against a copy of itself: the problem
    comes first, and every input shape it offers is one to_request accepts."""
    with pytest.raises(BadInput) as caught:
        to_request({"messages": "hi"}, MODEL)
    problem, offered = caught.value.message.split(" Accepted input shapes: ")
    assert problem == "messages must be a list of message objects, got a string."
    shapes = [set(re.findall(r'"(\w+)":', shape)) for shape in offered.rstrip(".").split("; ")]
    assert len(shapes) == 4
    for keys in shapes:
        request = to_request({key: _EXAMPLE[key] for key in keys}, MODEL)
        assert request.path.startswith("/v1/")


# -- properties -----------------------------------------------------------------------

KEYS = st.sampled_from(
    [
        "openai_route",
        "openai_input",
        "route",
        "method",
        "body",
        "prompt",
        "messages",
        "sampling_params",
        "stream",
        "apply_chat_template",
        "model",
    ]
)
ROUTES = st.one_of(
    st.sampled_from(["/v1/models", "/v1/chat/completions", "/v1/completions", "/health"]),
    st.text(alphabet="/v1.%?#:abc-_~ ", max_size=24).map(lambda s: "/v1/" + s),
    st.text(max_size=12),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS | ROUTES | st.sampled_from(["GET", "POST", "post", "PUT"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(KEYS | st.text(max_size=6), JSON, max_size=4)
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": SCALARS}))
# Shape-shaped inputs, so the property reaches the accepting paths, not only refusals.
OPENAI = st.fixed_dictionaries(
    {"openai_route": ROUTES}, optional={"openai_input": st.none() | OBJECTS | JSON}
)
GENERIC = st.fixed_dictionaries(
    {"route": ROUTES},
    optional={"method": st.sampled_from(["GET", "POST", "Post"]) | JSON, "body": OBJECTS | JSON},
)
STANDARD = st.fixed_dictionaries(
    {},
    optional={
        "prompt": st.text(max_size=8) | JSON,
        "messages": MESSAGES | JSON,
        "sampling_params": OBJECTS | JSON,
        "stream": st.booleans() | JSON,
        "apply_chat_template": st.booleans() | JSON,
    },
)
INPUTS = st.one_of(JSON, st.dictionaries(KEYS, JSON, max_size=5), OPENAI, GENERIC, STANDARD)


@settings(max_examples=tiers.examples(600), deadline=None)
@given(INPUTS)
def test_any_json_gives_a_request_or_bad_input(job_input: object) -> None:
    try:
        request = to_request(job_input, MODEL)
    except BadInput as exc:
        assert exc.problem and exc.message.endswith(ACCEPTED_SHAPES)
        return
    assert isinstance(request, ProxyRequest)
    assert request.method in ("GET", "POST")
    assert request.path.startswith("/v1/")
    assert not set(request.path) & set("?#%: \\") and "/../" not in request.path + "/"
    if request.body is None:
        assert request.stream is False
    else:
        assert request.method == "POST"
        assert request.body["model"] is not None
        json.dumps(request.body, allow_nan=False)  # the proxy can always encode it
        assert request.stream == (request.body.get("stream") is True)


@pytest.mark.parametrize(
    ("value", "streamed"),
    [
        (True, True),
        (1, True),
        (1.0, True),
        ("yes", True),
        ("YES", True),
        ("true", True),
        ("on", True),
        ("y", True),
        ("t", True),
        ("1", True),
        (False, False),
        (0, False),
        ("no", False),
        ("off", False),
        (None, False),
        (2, False),
        (" true ", False),
        ("", False),
        ([], False),
        ({}, False),
    ],
)
def test_stream_is_decided_as_vllm_reads_it(value, streamed):
    """vLLM declares ``stream: bool | None`` on pydantic models in lax mode; the worker must
    stream exactly when vLLM will (buffering a stream fails the job with "not JSON")."""
    request = to_request(
        {
            "openai_route": "/v1/chat/completions",
            "openai_input": {"messages": MSGS, "stream": value},
        },
        MODEL,
    )
    assert request.stream is streamed
    assert request.body["stream"] == value  # sent unchanged: vLLM judges the body


def test_an_input_with_300000_keys_gets_a_bounded_answer():
    job_input = {f"key-{i:06d}-" + "x" * 200: i for i in range(300_000)}
    with pytest.raises(BadInput) as info:
        to_request(job_input, MODEL)
    message = str(info.value)
    assert len(message) < 3000
    assert "and 299980 more" in message
    with pytest.raises(BadInput) as info:
        to_request({"prompt": "x", **job_input}, MODEL)
    assert len(str(info.value)) < 3000
