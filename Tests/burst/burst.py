#!/usr/bin/env python3
"""Many HTTP/1.1 GETs at once against one server, each on its own connection, for the burst
tests (Tests/PushMediaServerTests/MediaBurstTests.swift). Standard library only.

Each request reads its whole answer (status, headers, the body by Content-Length) and hashes the
body; a slow one (--rate) reads at that many bytes per second through a small receive buffer, so
the server feels it, and closes its connection after --hold seconds. Prints one JSON object:
{"results": [{"status", "bytes", "complete", "sha256", "seconds", "first_byte", "error"}...]},
in the order of the requests. Exit status 0 unless the arguments are wrong.
"""
import argparse
import asyncio
import hashlib
import json
import socket
import sys
import time


async def fetch(host, port, path, rate, hold, timeout, started, index):
    result = {"status": 0, "bytes": 0, "complete": False, "sha256": None, "seconds": None,
              "first_byte": None, "error": None}
    begin = time.monotonic()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rate:
        # A small receive window: the server's writes wait for this client's reads.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.setblocking(False)
    writer = None
    try:
        async with asyncio.timeout(timeout):
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=16384 if rate else 1 << 20)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            result["first_byte"] = round(time.monotonic() - begin, 4)
            started[index] = True
            lines = head.decode("latin-1").split("\r\n")
            result["status"] = int(lines[0].split(" ")[1])
            length = None
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            digest = hashlib.sha256()
            received = 0
            hold_until = begin + hold if hold else None
            while length is None or received < length:
                want = max(1024, rate // 2) if rate else 1 << 16
                if length is not None:
                    want = min(want, length - received)
                chunk = await reader.read(want)
                if not chunk:
                    break
                digest.update(chunk)
                received += len(chunk)
                if rate:
                    if hold_until and time.monotonic() >= hold_until:
                        result["error"] = "held"
                        break
                    # Pace: `received` bytes should take received / rate seconds.
                    ahead = received / rate - (time.monotonic() - begin)
                    if ahead > 0:
                        await asyncio.sleep(ahead)
            result["bytes"] = received
            result["complete"] = length is not None and received == length
            result["sha256"] = digest.hexdigest()
    except TimeoutError:
        result["error"] = "timeout"
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as error:
        result["error"] = f"{type(error).__name__}: {error}"
    finally:
        result["seconds"] = round(time.monotonic() - begin, 4)
        if writer is not None:
            writer.close()
        else:
            sock.close()
    return result


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--path", action="append", required=True, help="repeatable: requests cycle through them")
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--rate", type=int, default=0, help="bytes per second per request (0: as fast as it comes)")
    parser.add_argument("--hold", type=float, default=0, help="a slow request gives up after this many seconds")
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--ready-file", help="written once every request has its answer's head (or ended)")
    parser.add_argument("--ready-after", type=int, help="write --ready-file after this many requests instead")
    arguments = parser.parse_args()
    ready_after = min(arguments.count, arguments.ready_after or arguments.count)
    started = [False] * arguments.count
    tasks = [asyncio.create_task(fetch(arguments.host, arguments.port, arguments.path[i % len(arguments.path)],
                                       arguments.rate, arguments.hold, arguments.timeout, started, i))
             for i in range(arguments.count)]
    if arguments.ready_file:
        while sum(started[i] or task.done() for i, task in enumerate(tasks)) < ready_after:
            await asyncio.sleep(0.05)
        with open(arguments.ready_file, "w") as ready:
            ready.write("ready\n")
    results = await asyncio.gather(*tasks)
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
