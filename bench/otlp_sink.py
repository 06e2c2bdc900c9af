"""An OTLP/HTTP collector stand-in for bench/tracing.sh, in a process of its own (so that its
decoding is its own CPU): Tests/tracing/otlp_receiver.py's receiver on 127.0.0.1:PORT, which
decodes every export with opentelemetry-proto; on SIGTERM prints how many spans it received.
With COUNT_FILE, the count so far is also written there ten times a second (spans per request).

    python3 bench/otlp_sink.py PORT [COUNT_FILE]
"""

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "Tests", "tracing"))
from otlp_receiver import Receiver  # noqa: E402

receiver = Receiver(int(sys.argv[1]))
receiver.keep_spans = False
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print(f"otlp sink on {receiver.url}", flush=True)
count_file = sys.argv[2] if len(sys.argv) > 2 else None
while not stop.wait(0.1):
    if count_file:
        with open(count_file + ".tmp", "w") as f:
            f.write(str(receiver.count))
        os.replace(count_file + ".tmp", count_file)
print(f"spans {receiver.count}", flush=True)
