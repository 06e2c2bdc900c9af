#!/usr/bin/env python3
"""Measuring helpers for bench/run.sh (standard library only).

  measure.py run --out FILE.json --name NAME --items N [--origin-pid PID] [--tree] [--stdout F] [--stderr F] -- CMD ARGS...
      Runs CMD, and writes: wall seconds; CPU seconds (user+sys) of CMD and every descendant it
      waited for (getrusage(RUSAGE_CHILDREN)); peak RSS: the largest single process
      (ru_maxrss) and, sampled every 100 ms from /proc, the largest sum over the live process
      tree (--tree; otherwise CMD's own VmRSS, sampled every 50 ms); and the CPU the origin
      (--origin-pid, its whole tree) spent meanwhile. CMD's exit status is recorded, and
      measure.py exits with it.

  measure.py tree-cpu PID         CPU seconds (user+sys) of the live tree under PID.
  measure.py tree PID             PID and its live descendants.
  measure.py busy                 CPU seconds the whole machine has been busy since boot.
  measure.py rss PID              VmRSS and VmHWM of PID in kB, as JSON.
  measure.py sample-rss PID CSV SECONDS
                                  Appends "t,rss_kb" every second for SECONDS (or until PID ends).
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def parents():
    """{pid: ppid} of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2:].split()
        table[int(entry)] = int(fields[1])
    return table


def tree(pid):
    """pid and all its live descendants (nothing if pid is gone)."""
    if not os.path.exists(f"/proc/{pid}"):
        return []
    table = parents()
    kids = {}
    for p, pp in table.items():
        kids.setdefault(pp, []).append(p)
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE // 1024
    except (OSError, IndexError, ValueError):
        return 0


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid):
    """utime+stime of one live process (its threads included), in seconds."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def machine_busy_s():
    """CPU seconds spent by the whole machine (all CPUs, anything not idle or iowait) since boot."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    v = [int(x) for x in fields]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / TICKS


def tree_cpu_s(pid):
    return sum(cpu_s(p) for p in tree(pid))


class Sampler(threading.Thread):
    def __init__(self, pid, whole_tree, interval):
        super().__init__(daemon=True)
        self.pid, self.whole_tree, self.interval = pid, whole_tree, interval
        self.peak_kb = 0
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            pids = tree(self.pid) if self.whole_tree else [self.pid]
            self.peak_kb = max(self.peak_kb, sum(rss_kb(p) for p in pids))
            self.stop_flag.wait(self.interval)


def cmd_run(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="measure.py run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--items", type=int, required=True)
    ap.add_argument("--origin-pid", type=int)
    ap.add_argument("--tree", action="store_true")
    ap.add_argument("--stdout")
    ap.add_argument("--stderr")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    origin0 = tree_cpu_s(a.origin_pid) if a.origin_pid else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = machine_busy_s()
    stdout = open(a.stdout, "w") if a.stdout else None
    stderr = open(a.stderr, "w") if a.stderr else None
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
    sampler = Sampler(proc.pid, a.tree, 0.1 if a.tree else 0.05)
    sampler.start()
    rc = proc.wait()
    wall = time.perf_counter() - start
    sampler.stop_flag.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy = machine_busy_s() - busy0
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    result = {
        "name": a.name, "items": a.items, "exit": rc, "wall_s": round(wall, 3),
        "cpu_user_s": round(user, 3), "cpu_sys_s": round(system, 3), "cpu_s": round(user + system, 3),
        "items_per_s": round(a.items / wall, 3) if wall else None,
        "cpu_s_per_item": round((user + system) / a.items, 4) if a.items else None,
        "peak_rss_mb": round(max(sampler.peak_kb, after.ru_maxrss if not a.tree else 0) / 1024, 1),
        "max_single_rss_mb": round(after.ru_maxrss / 1024, 1),
        "rss_method": "sum over the process tree, sampled every 100 ms" if a.tree else "ru_maxrss of the process",
        "command": cmd,
        "machine_busy_cpu_s": round(busy, 2),
    }
    if a.origin_pid:
        result["origin_cpu_s"] = round(tree_cpu_s(a.origin_pid) - origin0, 3)
    # What the rest of the machine did meanwhile (other users' builds, this script's sampling).
    result["other_cpu_s"] = round(busy - result["cpu_s"] - result.get("origin_cpu_s", 0), 2)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"  {a.name}: {a.items} items in {wall:.1f} s = {result['items_per_s']} items/s, "
          f"{result['cpu_s_per_item']} CPU-s/item, peak RSS {result['peak_rss_mb']} MB (exit {rc})", file=sys.stderr)
    return rc


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    verb, rest = sys.argv[1], sys.argv[2:]
    if verb == "run":
        return cmd_run(rest)
    if verb == "tree-cpu":
        print(f"{tree_cpu_s(int(rest[0])):.3f}")
        return 0
    if verb == "tree":
        print(" ".join(str(p) for p in tree(int(rest[0]))))
        return 0
    if verb == "busy":
        print(f"{machine_busy_s():.2f}")
        return 0
    if verb == "rss":
        pid = int(rest[0])
        print(json.dumps({"rss_kb": status_kb(pid, "VmRSS"), "hwm_kb": status_kb(pid, "VmHWM")}))
        return 0
    if verb == "sample-rss":
        pid, path, seconds = int(rest[0]), rest[1], float(rest[2])
        start = time.time()
        with open(path, "a") as f:
            while time.time() - start < seconds and os.path.exists(f"/proc/{pid}"):
                f.write(f"{time.time() - start:.0f},{status_kb(pid, 'VmRSS')}\n")
                f.flush()
                time.sleep(1)
        return 0
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main())
