"""The shell examples of README.md and docs/*.md run against a real `pushmedia serve`, so the docs
cannot drift from the code. A fenced `sh` block is run when the line before it is
`<!-- runnable -->` (against a server without auth) or `<!-- runnable: auth -->` (against one
with a bearer token, $CAMPAIGN_TOKEN, and an HMAC secret, $PUSHMEDIA_SECRET). Its hosts
(`http://127.0.0.1:8080`, `https://push-media.shop.example`, `https://media.shop.example`) are
rewritten to the server's address, `pushmedia` is the binary under test, `payload.json` is a
payload in its working folder, and it must exit 0 (the examples use `curl -f`). A block that
talks to PushMedia but cannot run here says so with `<!-- not runnable: why -->`; one that does
neither fails the check.

    python3 Tests/docs/run_examples.py --bin .build/debug/pushmedia
"""

import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEY = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
SALT = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"
TOKEN = "docs-example-token-0123456789"
SECRET = "docs-example-secret-0123456789"
HOSTS = ["http://127.0.0.1:8080", "https://push-media.shop.example", "https://media.shop.example"]
# What makes a block one that talks to PushMedia: a curl to one of its hosts, or a command that
# checks its input the way the server does.
TALKS = re.compile(r"^\s*curl\b.*(127\.0\.0\.1:8080|shop\.example|relay\.internal)|\bpushmedia (url|check-config)\b",
                   re.M)


def blocks():
    """(file, line, marker, body) of every fenced sh block, marker the comment line before it."""
    for path in ["README.md"] + sorted(glob.glob("docs/*.md")):
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        for match in re.finditer(r"```(?:sh|bash)\n(.*?)```", text, re.S):
            before = text[:match.start()].rstrip("\n").split("\n")[-1].strip()
            marker = before if before.startswith("<!--") else ""
            yield path, text[:match.start()].count("\n") + 1, marker, match.group(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(binary, work, name, extra):
    port = free_port()
    log = open(os.path.join(work, f"{name}.log"), "wb")
    process = subprocess.Popen(
        [binary, "serve", "--port", str(port), "--store", os.path.join(work, f"store-{name}"),
         "--url-key", KEY, "--url-salt", SALT, "--url-allow-source", "https://cdn.shop.example/"] + extra,
        stdout=subprocess.DEVNULL, stderr=log, env={k: v for k, v in os.environ.items()
                                                   if not k.startswith("PUSHMEDIA_")})
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return process, port
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.05)
    raise SystemExit(f"pushmedia serve ({name}) did not start; see {log.name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/debug/pushmedia"))
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="docs-examples-")
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    os.symlink(binary, os.path.join(bindir, "pushmedia"))
    servers = {
        "": serve(binary, work, "open", []),
        "auth": serve(binary, work, "auth", ["--token", TOKEN, "--hmac-secret", SECRET]),
    }
    failed = ran = 0
    try:
        for path, line, marker, body in blocks():
            where = f"{path}:{line}"
            runnable = re.match(r"<!-- runnable(?::\s*(\w+))? -->", marker)
            if not runnable:
                if TALKS.search(body) and not marker.startswith("<!-- not runnable:"):
                    failed += 1
                    print(f"FAIL {where}: talks to PushMedia but is marked neither runnable nor not runnable")
                continue
            kind = runnable.group(1) or ""
            if kind not in servers:
                failed += 1
                print(f"FAIL {where}: unknown marker {marker}")
                continue
            port = servers[kind][1]
            script = body
            for host in HOSTS:
                script = script.replace(host, f"http://127.0.0.1:{port}")
            folder = tempfile.mkdtemp(dir=work)
            with open(os.path.join(folder, "payload.json"), "w") as f:
                json.dump({"aps": {"alert": {"title": "Docs", "body": "Example"}, "mutable-content": 1},
                           "media_url": "https://cdn.shop.example/hero.webp"}, f)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PUSHMEDIA_")}
            env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), CAMPAIGN_TOKEN=TOKEN, PUSHMEDIA_SECRET=SECRET)
            started = time.monotonic()
            try:
                result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env,
                                        capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                failed += 1
                print(f"FAIL {where}: did not finish within 120 s")
                continue
            ran += 1
            if result.returncode != 0:
                failed += 1
                print(f"FAIL {where}: exit {result.returncode}\n{result.stderr[-800:]}")
            else:
                print(f"ok  {where} ({time.monotonic() - started:.1f}s)")
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=20)
    # The examples are few; fewer than these means markers went missing.
    if ran < 7:
        failed += 1
        print(f"FAIL only {ran} runnable examples found")
    print(f"docs examples: {ran} run, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
