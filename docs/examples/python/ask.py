"""Ask ragsvc a question from Python: stream the answer, then print its sources and status.

Usage: python ask.py ["How is the confidence score computed?"] (with ragsvc's stubs importable: .venv/bin/python).
The address is RAG_GRPC_ADDRESS, else 127.0.0.1:50051, as for the ragsvc CLI.
"""

import os
import sys

import grpc

from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

address = os.environ.get("RAG_GRPC_ADDRESS", "127.0.0.1:50051")
query = sys.argv[1] if len(sys.argv) > 1 else "How is the confidence score computed?"
with grpc.insecure_channel(address) as channel:
    stub = rag_service_pb2_grpc.RagServiceStub(channel)
    for message in stub.AskStream(pb.AskStreamRequest(query=query), timeout=30):
        if message.HasField("text_delta"):
            print(message.text_delta, end="", flush=True)
        elif message.HasField("answer"):
            answer = message.answer
            print()
            for citation in answer.citations:
                print(f"  [#{citation.marker}] {citation.document_name} ({citation.source_id})")
            print(f"grounded={answer.grounded} confidence={answer.confidence.overall:.0f} {pb.Action.Name(answer.action)}")
