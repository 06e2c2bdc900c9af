#!/usr/bin/env python3
"""Small HTTP drivers for bench/run.sh (runs in bench/.venv: requests).

  http_load.py get URLS_FILE OUT_DIR --concurrency 2 --server-pid PID --name NAME --result FILE.json
      GETs every URL once (a resizing server's URLs, e.g. thumbor's), N at a time, saves the
      bodies, and writes the same result JSON as measure.py run, with the CPU and peak RSS of
      the *server's* process tree (PID and its children, from /proc) over the run, and the
      driver's own CPU beside it.

  http_load.py post BASE_URL URLS_FILE --concurrency C [--seconds S] [--distinct TAG] [--result FILE.json]
      POSTs one push payload per media URL to BASE_URL/v1/process (budget 60 s). Without
      --seconds, each URL once (cache warm-up), and fails unless every answer is 200 with
      status processed or passthrough. With --seconds S, keeps going round the list for S
      seconds, each URL made new with "?<TAG>=<n>" when --distinct is given (cache misses
      during the soak).
"""
import argparse
import json
import os
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

local = threading.local()


def session():
    if not hasattr(local, "s"):
        local.s = requests.Session()
    return local.s


def cmd_get(a):
    with open(a.urls) as f:
        urls = [line.strip() for line in f if line.strip()]
    os.makedirs(a.out, exist_ok=True)
    cpu0 = measure.tree_cpu_s(a.server_pid)
    origin0 = measure.tree_cpu_s(a.origin_pid) if a.origin_pid else None
    sampler = measure.Sampler(a.server_pid, True, 0.1)
    sampler.start()
    me0 = resource.getrusage(resource.RUSAGE_SELF)
    busy0 = measure.machine_busy_s()
    errors = []

    def one(i_url):
        i, url = i_url
        try:
            r = session().get(url, timeout=300)
            if r.status_code != 200 or not r.content.startswith(b"\xff\xd8"):
                return f"{url}: HTTP {r.status_code} {r.headers.get('content-type')} {r.content[:120]!r}"
            with open(os.path.join(a.out, f"{i:04d}.jpg"), "wb") as f:
                f.write(r.content)
        except Exception as e:
            return f"{url}: {type(e).__name__}: {e}"
        return None

    start = time.perf_counter()
    with ThreadPoolExecutor(a.concurrency) as pool:
        for err in pool.map(one, enumerate(urls)):
            if err:
                errors.append(err)
    wall = time.perf_counter() - start
    sampler.stop_flag.set()
    sampler.join()
    cpu = measure.tree_cpu_s(a.server_pid) - cpu0
    busy = measure.machine_busy_s() - busy0
    me1 = resource.getrusage(resource.RUSAGE_SELF)
    n = len(urls)
    result = {
        "name": a.name, "items": n, "exit": 1 if errors else 0, "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3), "items_per_s": round(n / wall, 3), "cpu_s_per_item": round(cpu / n, 4),
        "peak_rss_mb": round(sampler.peak_kb / 1024, 1),
        "rss_method": "sum over the server's process tree, sampled every 100 ms",
        "client_cpu_s": round(me1.ru_utime + me1.ru_stime - me0.ru_utime - me0.ru_stime, 3),
        "errors": len(errors), "error_samples": errors[:5],
    }
    if a.origin_pid:
        result["origin_cpu_s"] = round(measure.tree_cpu_s(a.origin_pid) - origin0, 3)
    result["machine_busy_cpu_s"] = round(busy, 2)
    result["other_cpu_s"] = round(busy - cpu - result["client_cpu_s"] - result.get("origin_cpu_s", 0), 2)
    with open(a.result, "w") as f:
        json.dump(result, f, indent=1)
    print(f"  {a.name}: {n} items in {wall:.1f} s = {result['items_per_s']} items/s, "
          f"{result['cpu_s_per_item']} CPU-s/item (server), peak RSS {result['peak_rss_mb']} MB, "
          f"{len(errors)} errors", file=sys.stderr)
    for e in errors[:5]:
        print("    " + e, file=sys.stderr)
    return 0


def payload(url, n):
    return json.dumps({"aps": {"alert": {"title": "Bench", "body": f"Item {n}"}, "mutable-content": 1},
                       "media_url": url})


def cmd_post(a):
    with open(a.urls) as f:
        urls = [line.strip() for line in f if line.strip()]
    endpoint = a.base.rstrip("/") + "/v1/process?budget_ms=60000"
    counts, bad = {}, []
    lock = threading.Lock()
    deadline = time.time() + a.seconds if a.seconds else None
    counter = iter(range(10**9))

    def one(n):
        url = urls[n % len(urls)]
        if a.distinct:
            url += ("&" if "?" in url else "?") + f"{a.distinct}={n}"
        try:
            r = session().post(endpoint, data=payload(url, n), headers={"Content-Type": "application/json"}, timeout=120)
            outcome = r.headers.get("X-PushMedia-Outcome", f"http_{r.status_code}")
            if r.status_code != 200:
                outcome = f"http_{r.status_code}"
        except Exception as e:
            outcome = f"error_{type(e).__name__}"
        with lock:
            counts[outcome] = counts.get(outcome, 0) + 1
            if not outcome.startswith(("processed", "passthrough")):
                bad.append(f"{url}: {outcome}")

    def worker():
        while True:
            with lock:
                n = next(counter)
            if deadline is None and n >= len(urls):
                return
            if deadline is not None and time.time() >= deadline:
                return
            one(n)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    total = sum(counts.values())
    result = {"requests": total, "wall_s": round(wall, 3), "outcomes": counts, "bad": len(bad), "bad_samples": bad[:5]}
    if a.result:
        with open(a.result, "w") as f:
            json.dump(result, f, indent=1)
    print(f"  POST {total} payloads in {wall:.1f} s: {counts}", file=sys.stderr)
    for b in bad[:5]:
        print("    " + b, file=sys.stderr)
    return 1 if (bad and not a.seconds) else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="verb", required=True)
    g = sub.add_parser("get")
    g.add_argument("urls")
    g.add_argument("out")
    g.add_argument("--concurrency", type=int, default=2)
    g.add_argument("--server-pid", type=int, required=True)
    g.add_argument("--origin-pid", type=int)
    g.add_argument("--name", required=True)
    g.add_argument("--result", required=True)
    p = sub.add_parser("post")
    p.add_argument("base")
    p.add_argument("urls")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--seconds", type=float)
    p.add_argument("--distinct")
    p.add_argument("--result")
    a = ap.parse_args()
    return cmd_get(a) if a.verb == "get" else cmd_post(a)


if __name__ == "__main__":
    sys.exit(main())
