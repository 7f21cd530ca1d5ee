"""The image tests build and run the project's Docker image; only scripts/test-image runs
them (it starts the Docker engine and builds the stand-in base first). A plain pytest
run does not collect them."""

import os

if os.environ.get("VLLM_WORKER_IMAGE_TEST") != "1":
    collect_ignore_glob = ["test_*.py"]
