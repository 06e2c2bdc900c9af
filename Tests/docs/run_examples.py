"""The shell examples of README.md and docs/*.md run against a real `pushmedia serve`, so the docs
cannot drift from the code. Every fenced `sh` or `bash` block is marked on the line before it:

  <!-- runnable -->          run against a server without auth
  <!-- runnable: auth -->    run against one with a bearer token ($CAMPAIGN_TOKEN) and an HMAC
                             secret ($PUSHMEDIA_SECRET)
  <!-- runnable: serves -->  the block starts `pushmedia serve` itself (in the foreground, or with
                             `&` before its own requests); its ports (8080, and a relay's 2197,
                             8444 or 443) become free ones, PUSHMEDIA_PORT is the hook's; it passes
                             when it exits 0, or when, still running, the hook answers /healthz and
                             every relay port it names accepts connections; then it is stopped
  <!-- not runnable: why --> it cannot run here (it sets up a machine, needs a cloud account, …)

A block marked neither way fails the check. In a runnable block the hosts
(`http://127.0.0.1:8080`, `https://push-media.shop.example`, `https://media.shop.example`) are
rewritten to the server's address; `pushmedia` (on the PATH) and `./pushmedia` are the binary
under test; its working folder holds `payload.json`, the repository's `samples/`, and a
self-signed certificate (`relay.pem`, its key `relay.key` and `relay-key.pem`); it must exit 0
(the examples use `curl -f`).

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
# The ports a `serves` block listens on: the hook's, the APNs relay's, the FCM relay's.
SERVED_PORTS = re.compile(r"(?<![\w.])(8080|2197|8444|443)\b")


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


def example_folder(work, binary):
    """A block's working folder: payload.json, samples/, ./pushmedia, and a self-signed
    certificate for the relays' TLS examples."""
    folder = tempfile.mkdtemp(dir=work)
    with open(os.path.join(folder, "payload.json"), "w") as f:
        json.dump({"aps": {"alert": {"title": "Docs", "body": "Example"}, "mutable-content": 1},
                   "media_url": "https://cdn.shop.example/hero.webp"}, f)
    os.symlink(os.path.join(ROOT, "samples"), os.path.join(folder, "samples"))
    os.symlink(binary, os.path.join(folder, "pushmedia"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", os.path.join(folder, "relay.key"),
                    "-out", os.path.join(folder, "relay.pem")], check=True, capture_output=True)
    os.symlink("relay.key", os.path.join(folder, "relay-key.pem"))
    return folder


def run_script(script, folder, env):
    """Runs a block to its end: None when it exits 0, else what went wrong."""
    try:
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env,
                                capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "did not finish within 120 s"
    return None if result.returncode == 0 else f"exit {result.returncode}\n{result.stderr[-800:]}"


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def run_serving(body, folder, env):
    """Runs a block that starts `pushmedia serve` on free ports: None when it exits 0, or when,
    still running, its hook answers /healthz and every relay port it names accepts connections."""
    ports = {}
    script = SERVED_PORTS.sub(lambda m: str(ports.setdefault(m.group(1), free_port())), body)
    hook = ports.setdefault("8080", free_port())
    for host in HOSTS:
        script = script.replace(host, f"http://127.0.0.1:{hook}")
    env = dict(env, PUSHMEDIA_PORT=str(hook))
    log = open(os.path.join(folder, "block.log"), "w+")
    process = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                log.seek(0)
                return None if code == 0 else f"exit {code}\n{log.read()[-800:]}"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{hook}/healthz", timeout=1)
                if all(listening(port) for name, port in ports.items() if name != "8080"):
                    return None
            except OSError:
                pass
            time.sleep(0.1)
        log.seek(0)
        return f"nothing answered on its ports within 60 s\n{log.read()[-800:]}"
    finally:
        try:
            os.killpg(process.pid, 15)
        except ProcessLookupError:
            pass
        process.wait(timeout=30)


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
                if not re.match(r"<!-- not runnable: \S.* -->", marker):
                    failed += 1
                    print(f"FAIL {where}: a shell block marked neither runnable nor not runnable (with a reason)")
                continue
            kind = runnable.group(1) or ""
            if kind not in servers and kind != "serves":
                failed += 1
                print(f"FAIL {where}: unknown marker {marker}")
                continue
            folder = example_folder(work, binary)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PUSHMEDIA_")}
            env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), CAMPAIGN_TOKEN=TOKEN, PUSHMEDIA_SECRET=SECRET)
            started = time.monotonic()
            if kind == "serves":
                error = run_serving(body, folder, env)
            else:
                script = body
                for host in HOSTS:
                    script = script.replace(host, f"http://127.0.0.1:{servers[kind][1]}")
                error = run_script(script, folder, env)
            ran += 1
            if error:
                failed += 1
                print(f"FAIL {where}: {error}")
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
