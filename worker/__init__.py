"""The RunPod worker around ``vllm serve`` (see docs/architecture.md)."""

from worker.queue import sdk_cpu as _sdk_cpu

_sdk_cpu.install()  # before any module here imports the RunPod SDK
