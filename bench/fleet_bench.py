#!/usr/bin/env python3
"""The fleet's cost (bench/fleet.sh): two `pushmedia serve` nodes as shipped (default settings,
info logs written to a file), one with `--fleet-db` and one without, each on a store of its own,
fetching from one origin on 127.0.0.1.

- cold: ITEMS distinct sources, each asked once through POST /v1/process, the two nodes in turn
  (the same machine noise for both): p50 and p90 of each, and the lease's added p50;
- batch: BATCH payloads naming distinct sources, as a local `pushmedia batch` (one per core at
  once) and as a fleet batch worked by two `pushmedia work --concurrency 1` and by one
  `pushmedia work` (one per core), each on a store of its own: items/s and the ratios;
- cached: REPEATS requests of one made payload to the fleet node, and PostgreSQL's transactions
  on the fleet's database meanwhile (pg_stat_database.xact_commit), against the same span with
  the node idle (its pool's keep-alive and the listener's own).

Prints a table and writes OUT/results.json. Standard library only.
"""
import argparse
import http.client
import http.server
import json
import os
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin:
    def __init__(self, body):
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "image/webp")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "public, max-age=3600")
                self.end_headers()
                self.wfile.write(body)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def post(port, body):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    connection.request("POST", "/v1/process", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    took = time.perf_counter() - started
    connection.close()
    if response.status != 200:
        raise SystemExit(f"POST answered {response.status}: {data[:200]}")
    return took, json.loads(data)


def payload(url):
    return json.dumps({"aps": {"alert": "Spring", "mutable-content": 1}, "image_url": url}).encode()


def psql(sql):
    # On the database `postgres`: this session's own transactions are not counted on the fleet's.
    return subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "psql", "-d", "postgres", "-tA", "-c", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


def commits():
    # Pending statistics reach pg_stat_database when a backend is idle (at most every second).
    time.sleep(2.5)
    return int(psql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'pushmedia'"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--items", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    env = dict(os.environ)
    fleet_env = dict(line.split("=", 1) for line in subprocess.run(
        [os.path.join(ROOT, "scripts", "postgres.sh"), "env"], check=True, capture_output=True,
        text=True).stdout.splitlines())
    db, password_file = fleet_env["PUSHMEDIA_TEST_FLEET_DB"], fleet_env["PUSHMEDIA_TEST_FLEET_DB_PASSWORD_FILE"]
    subprocess.run([args.bin, "fleet-db", "init", "--fleet-db", db, "--fleet-db-password-file", password_file],
                   check=True, capture_output=True)
    with open(os.path.join(ROOT, "samples", "media", "banner.webp"), "rb") as f:
        origin = Origin(f.read())
    work = tempfile.mkdtemp(prefix="pushmedia-bench-fleet-")
    nodes = {}
    processes = []
    for name, extra in (("plain", []), ("fleet", ["--fleet-db", db, "--fleet-db-password-file", password_file])):
        port = free_port()
        log = open(os.path.join(args.out, f"{name}.log"), "wb")
        processes.append(subprocess.Popen(
            [args.bin, "serve", "--port", str(port), "--store", os.path.join(work, name), "--allow-private-networks"]
            + extra, stdout=log, stderr=log, env=env))
        nodes[name] = port
    try:
        for port in nodes.values():
            for _ in range(200):
                try:
                    http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                    break
                except OSError:
                    time.sleep(0.05)
        # Warm both: the first transcode loads libvips' codecs.
        for name, port in nodes.items():
            post(port, payload(f"{origin.base}/warm-{name}.webp"))
        cold = {"plain": [], "fleet": []}
        for i in range(args.items):
            order = ("plain", "fleet") if i % 2 == 0 else ("fleet", "plain")
            for name in order:
                took, answer = post(nodes[name], payload(f"{origin.base}/{name}-{i}.webp"))
                if answer["outcome"].get("cache_hit"):
                    raise SystemExit(f"{name} item {i} was a cache hit")
                cold[name].append(took * 1000)
        body = payload(f"{origin.base}/cached.webp")
        post(nodes["fleet"], body)
        time.sleep(1)  # the made media's lease ends after the answer
        before = commits()
        started = time.perf_counter()
        cached = []
        for _ in range(args.repeats):
            took, answer = post(nodes["fleet"], body)
            cached.append(took * 1000)
        span = time.perf_counter() - started
        after = commits()
        # The same span with the node idle: what the node's connections do on their own.
        idle_before = commits()
        time.sleep(span)
        idle_after = commits()
        for process in processes:
            process.terminate()
            process.wait()
        processes = []
        batch = batches(args, origin, work, db, password_file)
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        origin.server.shutdown()

    def quantile(values, q):
        return statistics.quantiles(values, n=100)[q - 1]

    results = {
        "cold_items": args.items,
        "cold_p50_ms": {k: round(statistics.median(v), 2) for k, v in cold.items()},
        "cold_p90_ms": {k: round(quantile(v, 90), 2) for k, v in cold.items()},
        "lease_added_p50_ms": round(statistics.median(cold["fleet"]) - statistics.median(cold["plain"]), 2),
        "cached_requests": args.repeats,
        "cached_p50_ms": round(statistics.median(cached), 3),
        "cached_seconds": round(span, 2),
        "db_commits_during_cached": after - before,
        "db_commits_idle_same_span": idle_after - idle_before,
        "batch": batch,
    }
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(f"cold /v1/process, {args.items} distinct sources each, nodes in turn:")
    for name in ("plain", "fleet"):
        print(f"  {name:6} p50 {results['cold_p50_ms'][name]:8.2f} ms   p90 {results['cold_p90_ms'][name]:8.2f} ms")
    print(f"  the lease adds {results['lease_added_p50_ms']:.2f} ms at p50 (target <= 2 ms)")
    print(f"cached: {args.repeats} requests in {span:.1f} s (p50 {results['cached_p50_ms']} ms); the fleet's database "
          f"committed {results['db_commits_during_cached']} transactions meanwhile "
          f"({results['db_commits_idle_same_span']} in the same span idle)")
    print(f"batch of {args.batch} distinct sources: local {batch['local_items_per_s']} items/s; fleet, 2 workers "
          f"{batch['fleet_2_items_per_s']} ({batch['fleet_2_ratio']} x, target >= 0.9); 1 worker "
          f"{batch['fleet_1_items_per_s']} ({batch['fleet_1_ratio']} x)")
    return 0


def batches(args, origin, work, db, password_file):
    """Items/s of a local batch and of fleet batches of the same payloads (distinct sources)."""
    results = {}
    runs = [("local", None), ("fleet_2", (2, 1)), ("fleet_1", (1, os.cpu_count() or 2))]
    for name, fleet in runs:
        folder = os.path.join(work, f"batch-{name}")
        os.makedirs(folder)
        for i in range(args.batch):
            with open(os.path.join(folder, f"p{i:04d}.json"), "wb") as f:
                f.write(payload(f"{origin.base}/{name}/item-{i}.webp"))
        store = os.path.join(work, f"store-{name}")
        flags = ["--store", store, "--allow-private-networks", "--fleet-db", db, "--fleet-db-password-file",
                 password_file]
        if fleet is None:
            started = time.perf_counter()
            subprocess.run([args.bin, "batch", folder, "--out", os.path.join(work, f"out-{name}")] + flags[:3],
                           check=True, capture_output=True)
            took = time.perf_counter() - started
        else:
            workers, width = fleet
            batch_name = f"bench-{name}-{os.getpid()}-{int(time.time())}"
            subprocess.run([args.bin, "batch", "--fleet", batch_name, folder] + flags, check=True, capture_output=True)
            started = time.perf_counter()
            running = [subprocess.Popen([args.bin, "work", "--fleet", batch_name, "--concurrency", str(width)] + flags,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for _ in range(workers)]
            for process in running:
                if process.wait() != 0:
                    raise SystemExit(f"a worker of {name} exited {process.returncode}")
            took = time.perf_counter() - started
        results[f"{name}_seconds"] = round(took, 2)
        results[f"{name}_items_per_s"] = round(args.batch / took, 1)
    for name in ("fleet_2", "fleet_1"):
        results[f"{name}_ratio"] = round(results[f"{name}_items_per_s"] / results["local_items_per_s"], 3)
    return results


if __name__ == "__main__":
    sys.exit(main())
