"""`make bench`: every benchmark in bench/, one after the other (not part of `make test`)."""

from bench import ask_latency

if __name__ == "__main__":
    ask_latency.main()
