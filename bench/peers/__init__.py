"""ragsvc side by side with LangChain, LlamaIndex, Haystack and a hand-written baseline doing the same job.

`run` is the harness; each peer is a worker process (`common.run_worker`) in a venv of its own.
"""
