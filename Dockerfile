# RunPod Serverless queue worker for vLLM: `python -m worker` supervises the image's own
# `vllm serve` (VLLM_COMMAND) and answers jobs. Build args and examples: README.md,
# "Docker image". A gated model's token is a BuildKit secret, never a build arg:
#
#   docker build -t vllm-worker .
#   docker build -t vllm-worker-llama --build-arg MODEL_NAME=meta-llama/Llama-3.1-8B-Instruct \
#       --secret id=HF_TOKEN,env=HF_TOKEN .

ARG VLLM_VERSION=v0.32.0
FROM vllm/vllm-openai:${VLLM_VERSION}

# The worker gets its own venv: the RunPod SDK pins a FastAPI that conflicts with vLLM's,
# so nothing is ever pip-installed into the environment vLLM runs from. Dependencies
# first (read from pyproject.toml), the package itself last: changing the code does not
# download the dependencies again.
# Behind a proxy or with a private index, pip's configuration (and the CA certificate of
# a TLS-intercepting proxy, named in it as cert = /run/secrets/pip-ca.crt) come in as
# build secrets: mounted for this step only, never stored in a layer (docs/image.md).
COPY pyproject.toml /src/
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf \
    --mount=type=secret,id=pip-ca.crt \
    python3 -m venv /opt/worker \
    && /opt/worker/bin/python -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb")); print("\n".join(p["project"]["dependencies"] + p["build-system"]["requires"]))' >/tmp/requirements.txt \
    && /opt/worker/bin/pip install --no-cache-dir --disable-pip-version-check -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
COPY setup.py README.md /src/
COPY worker/ /src/worker/
COPY diagnostics/ /src/diagnostics/
COPY rules/ /src/rules/
RUN /opt/worker/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps \
        --no-build-isolation /src \
    && rm -rf /src
# The snapshots of vLLM's flags and model registry that the worker reads come from this
# image's own vLLM (its python3), so an image built with another VLLM_VERSION carries
# the right ones (docs/preflight.md); a vLLM that cannot be read fails the build.
COPY scripts/snapshot_vllm_flags.py scripts/snapshot_vllm_models.py /tmp/snapshot/
RUN pkg="$(/opt/worker/bin/python -c 'import os, worker; print(os.path.dirname(worker.__file__))')" \
    && python3 /tmp/snapshot/snapshot_vllm_flags.py --print >"${pkg}/config/vllm_flags.json" \
    && python3 /tmp/snapshot/snapshot_vllm_models.py --output "${pkg}/preflight/vllm_models.json" \
    && rm -rf /tmp/snapshot
# The rule pack's compiled Hyperscan databases, cached where the worker and `diagnose` look
# for them at run time (~/.cache/runpod-vllm-worker): the classifier's (load_pack) and the
# whole-log fast path's and the message catalogue's index (one diagnose run of an
# unknown exception); a cold start reads them instead of compiling
# them (seconds on 2 CPUs). A host whose CPU cannot run them compiles its own
# (diagnostics/pack/dbcache.py). diagnose exits 1 for the failed start it is given.
RUN /opt/worker/bin/python -c 'from diagnostics.pack.rules import load_pack; load_pack()' \
    && printf 'INFO Starting vLLM\nValueError: warm-up\n' >/tmp/warm.log \
    && { /opt/worker/bin/diagnose /tmp/warm.log >/dev/null; test "$?" -le 1; } \
    && rm /tmp/warm.log
# `python -m` puts the working directory first on sys.path: the base image's workspace
# must not be able to shadow the worker's packages, in `python -m worker.image.bake` below or
# in the entrypoint.
WORKDIR /opt/worker

# Caches on the network volume (when one is attached at BASE_PATH) survive cold starts.
# Without a volume the crash-loop breaker keeps its ledger on the container disk, where a
# restart of the same container finds it (docs/image.md).
ARG BASE_PATH=/runpod-volume
ENV BASE_PATH=${BASE_PATH} \
    HF_HOME=${BASE_PATH}/huggingface-cache \
    VLLM_CACHE_ROOT=${BASE_PATH}/vllm-cache \
    CRASH_LOOP_LEDGER_DIR=/var/lib/vllm-worker

# Baking a model (MODEL_NAME set): downloaded into /model at build time with the manifest
# /model/baked.json, which the worker then serves from with the Hub offline. /model, not
# HF_HOME: a network volume mounted at BASE_PATH would hide anything baked under it.
ARG MODEL_NAME=""
ARG MODEL_REVISION=main
# DL3064 takes the TOKEN in TOKENIZER_NAME for a credential; it is a repo id.
# hadolint ignore=DL3064
ARG TOKENIZER_NAME=""
# DL3064 again: TOKENIZER_REVISION is a branch, tag or commit, not a credential.
# hadolint ignore=DL3064
ARG TOKENIZER_REVISION=""
ARG QUANTIZATION=""
ENV QUANTIZATION=${QUANTIZATION}
# A Hugging Face mirror (or a local hub) to bake from; empty: huggingface.co. Used by
# the bake step only and not in the image's environment, but a build arg used in a RUN
# step is recorded in the image history: a mirror whose URL holds credentials goes in as
# the HF_ENDPOINT build secret instead (--secret id=HF_ENDPOINT,env=HF_ENDPOINT).
ARG HF_ENDPOINT=""

# The token (and a secret HF_ENDPOINT) are mounted at /run/secrets/ for this step only:
# they never reach a layer or the image history. The download's own Hub cache (HF_HOME)
# is a temporary one.
RUN --mount=type=secret,id=HF_TOKEN \
    --mount=type=secret,id=HF_ENDPOINT \
    if [ -z "${HF_ENDPOINT}" ]; then unset HF_ENDPOINT; fi; \
    if [ -n "${MODEL_NAME}" ]; then \
        HF_HOME=/tmp/bake-hf-home /opt/worker/bin/python -m worker.image.bake --target /model \
            --model "${MODEL_NAME}" --revision "${MODEL_REVISION}" \
            --tokenizer "${TOKENIZER_NAME}" --tokenizer-revision "${TOKENIZER_REVISION}" \
        && rm -rf /tmp/bake-hf-home; \
    fi

# Exec form: replaces the base image's `vllm serve` entrypoint (and resets its CMD).
ENTRYPOINT ["/opt/worker/bin/python", "-m", "worker"]
