"""Answering a question: one service (`service.AnsweringService`) serves Ask, AskStream and SimulateAsk; it runs
the pipeline (`pipeline.Pipeline`), whose stages each have explicit inputs and outputs:

    admit -> (replay | cache) -> history -> retrieve -> gate -> pack -> generate (with fallback)
          -> validate (with re-runs) -> assemble -> remember -> record

Nothing here knows gRPC: the transport hands a `context.CallContext` in and reads events out.
"""
