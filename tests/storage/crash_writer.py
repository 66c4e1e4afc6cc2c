"""A process that answers and records as fast as it can, printing the request id of every answer it hands out:
the crash test kills it with SIGKILL and checks that every printed answer has its audit row.

`python -m tests.storage.crash_writer TARGET` (a SQLite path or a postgresql:// URL); 32 concurrent requesters.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator

from ragsvc.domain import Answer, Event, TextDelta
from ragsvc.storage.answers import AnswerLog
from ragsvc.storage.database import open_database
from tests.storage.samples import answer, question

REQUESTERS = 32


async def _events() -> AsyncIterator[Event]:
    yield TextDelta("part ")
    await asyncio.sleep(0.001)
    yield answer()


async def main(target: str) -> None:
    database = await open_database(target)
    log = AnswerLog(database)
    numbers = itertools.count()

    async def requester() -> None:
        while True:
            request_id = f"r{next(numbers)}"
            async for event in log.recorded(question(request_id=request_id), _events()):
                if isinstance(event, Answer):
                    # The client has its answer: it is now out of the process, on the pipe.
                    sys.stdout.write(request_id + "\n")
                    sys.stdout.flush()

    print("ready", flush=True)
    await asyncio.gather(*(requester() for _ in range(REQUESTERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
