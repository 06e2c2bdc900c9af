"""Media URLs end to end, with real parts only: a real `pushmedia serve` with a URL key and an
allow-listed origin, an HTTP origin on 127.0.0.1, imgproxy's URL builders from PyPI (imgproxy 1.0,
pyimgproxy 0.4) making the URLs, the docs' own Python and Node helpers (docs/media-urls.md), curl and headless
Chromium fetching them, and nginx from Debian as a caching CDN in front (proxy_cache with
proxy_cache_lock): 200 phones asking for a new campaign image at once make one origin fetch.

    scripts/media-url.sh                   # all checks
    scripts/media-url.sh --only cdn -v     # one check, verbose
"""

import base64
import concurrent.futures
import hashlib
import hmac
import http.client
import http.server
import json
import os
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from relay_harness import ROOT, CheckFailed, Proc, check, expect, free_port, run_checks, CHECKS  # noqa: E402

KEY = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
SALT = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"
SAMPLES = os.path.join(ROOT, "samples", "media")


def sample(name):
    with open(os.path.join(SAMPLES, name), "rb") as f:
        return f.read()


class Origin:
    """A threaded HTTP/1.1 origin on 127.0.0.1: `files` maps a path to (bytes, content type or
    None, delay in seconds); counts GETs per path."""

    def __init__(self, files):
        self.files = dict(files)
        self.gets = {}
        self.started = {}
        self.lock = threading.Lock()
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?", 1)[0]
                with origin.lock:
                    origin.gets[path] = origin.gets.get(path, 0) + 1
                    origin.started.setdefault(path, []).append(time.monotonic())
                    entry = origin.files.get(path)
                if entry is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body, content_type, delay = entry
                if delay:
                    time.sleep(delay)
                self.send_response(200)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "public, max-age=3600")
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return self.base + path

    def hits(self, path):
        with self.lock:
            return self.gets.get(path, 0)

    def starts(self, path):
        """When each GET of `path` arrived (time.monotonic())."""
        with self.lock:
            return list(self.started.get(path, []))

    def add(self, path, body, content_type=None, delay=0):
        with self.lock:
            self.files[path] = (body, content_type, delay)

    def stop(self):
        self.server.shutdown()


def get(url, headers=None, follow=True, timeout=30):
    """(status, headers as a dict with lowercase names, body) of a GET, following redirects
    (relative ones too) when `follow`; the path is sent as given (no dot-segment removal)."""
    for _ in range(5):
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        target = parts.path + ("?" + parts.query if parts.query else "")
        connection.request("GET", target, headers=headers or {})
        response = connection.getresponse()
        body = response.read()
        found = {k.lower(): v for k, v in response.getheaders()}
        connection.close()
        if follow and response.status in (301, 302, 307, 308) and "location" in found:
            url = urllib.parse.urljoin(url, found["location"])
            continue
        return response.status, found, body
    raise CheckFailed(f"too many redirects from {url}")


def is_jpeg(body):
    return body[:3] == b"\xff\xd8\xff"


class World:
    """The origin, `pushmedia serve` with media URLs on, and (on first use) nginx in front."""

    def __init__(self, bin_path, work):
        self.bin = bin_path
        self.work = work
        self._nginx = None
        if not os.access(bin_path, os.X_OK):
            raise SystemExit(f"{bin_path} is missing (swift build first)")
        self.origin = Origin({
            "/banner": (sample("banner.webp"), None, 0),
            "/photo.png": (sample("logo-alpha.png"), "image/png", 0),
            "/photo.jpg": (sample("photo-exif.jpg"), "image/jpeg", 0),
            "/spinner.gif": (sample("spinner.gif"), "image/gif", 0),
            "/portrait.heic": (sample("portrait.heic"), "image/heic", 0),
            "/slow": (sample("banner.webp"), "image/webp", 4),
        })
        port = free_port()
        self.serve = Proc("serve", [
            bin_path, "serve", "--port", str(port), "--store", os.path.join(work, "store"),
            "--allow-private-networks", "--url-key", KEY, "--url-salt", SALT,
            "--url-allow-source", self.origin.base + "/", "--url-budget", "2s",
        ], work)
        self.serve.wait_for([r"PushMedia listening on"])
        self.base = f"http://127.0.0.1:{port}"

    @property
    def nginx(self):
        """nginx as a caching reverse proxy in front of serve: its base URL."""
        if self._nginx is None:
            self._nginx = Nginx(self.work, self.base)
        return self._nginx.base

    def close(self):
        if self._nginx:
            self._nginx.stop()
        self.origin.stop()


class Nginx:
    def __init__(self, work, upstream):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.access(nginx, os.X_OK):
            raise CheckFailed("nginx is missing (Debian: nginx-light)")
        folder = os.path.join(work, "nginx")
        os.makedirs(os.path.join(folder, "cache"), exist_ok=True)
        os.makedirs(os.path.join(folder, "temp"), exist_ok=True)
        port = free_port()
        conf = os.path.join(folder, "nginx.conf")
        with open(conf, "w") as f:
            # As root, nginx's workers would be `nobody`, who cannot enter the work folder.
            user = "user root root;" if os.geteuid() == 0 else ""
            f.write(f"""
{user}
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 2048; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/temp/body;
    proxy_temp_path {folder}/temp/proxy;
    fastcgi_temp_path {folder}/temp/fastcgi;
    uwsgi_temp_path {folder}/temp/uwsgi;
    scgi_temp_path {folder}/temp/scgi;
    proxy_cache_path {folder}/cache levels=1:2 keys_zone=media:10m max_size=1g inactive=1h use_temp_path=off;
    server {{
        listen 127.0.0.1:{port} backlog=1024;
        location / {{
            proxy_pass {upstream};
            proxy_http_version 1.1;
            proxy_cache media;
            proxy_cache_lock on;
            add_header X-Cache-Status $upstream_cache_status;
        }}
    }}
}}
""")
        self.proc = Proc("nginx", [nginx, "-p", folder, "-c", conf], work)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                get(self.base + "/healthz", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or not self.proc.alive():
                    raise CheckFailed(f"nginx did not start: {self.proc.stderr_tail()}")
                time.sleep(0.1)

    def stop(self):
        self.proc.stop()


def unsigned(world, path, ext="jpg", profile="ios"):
    return f"{world.base}/insecure/pr:{profile}/plain/{world.origin.url(path)}" + (f"@{ext}" if ext else "")


# -- checks ------------------------------------------------------------------------------------

@check("url")
def imgproxy_builders_make_urls_that_work(world):
    """URLs as imgproxy's URL builders from PyPI make them, signed and unsigned, with their own
    shape options, `format:` instead of an extension, and plain sources without one."""
    from imgproxy import ImgProxy
    import pyimgproxy

    source = world.origin.url("/banner")
    urls = {
        "imgproxy signed": str(ImgProxy(source, proxy_host=world.base, key=KEY, salt=SALT, extension="jpg",
                                        advanced=["pr:ios"])),
        "imgproxy unsigned": str(ImgProxy(source, proxy_host=world.base, extension="jpg")),
        "imgproxy without extension": str(ImgProxy(source, proxy_host=world.base, key=KEY, salt=SALT)),
    }
    signed = pyimgproxy.ImgProxy(url=world.base, key=KEY, salt=SALT)
    open_ = pyimgproxy.ImgProxy(url=world.base)
    urls["pyimgproxy signed, format:"] = signed.image(source).add_option("pr", "ios").format("jpg").url
    urls["pyimgproxy signed, shape options"] = (
        signed.image(source).add_option("pr", "android").width(300).height(200).gravity("ce").quality(80).url)
    urls["pyimgproxy unsigned"] = open_.image(source).format("jpg").url
    for name, url in urls.items():
        status, headers, body = get(url)
        expect(status == 200, f"{name}: {url} answered {status}: {body[:200]!r}")
        expect(headers.get("content-type") == "image/jpeg" and is_jpeg(body), f"{name}: not a JPEG ({headers})")
        expect(headers.get("content-disposition") == 'inline; filename="banner.jpg"', f"{name}: {headers}")
    # A tampered signature is refused before anything is fetched.
    before = world.origin.hits("/banner")
    bad = urls["imgproxy signed"].replace("/pr:ios/", "/pr:web/")
    status, _, body = get(bad)
    expect(status == 403 and b"invalid_signature" in body, f"tampered URL answered {status}: {body[:200]!r}")
    expect(world.origin.hits("/banner") == before, "a refused URL fetched the source")
    expect(world.origin.hits("/banner") <= 3, f"{world.origin.hits('/banner')} fetches for 3 entries (ios, android, "
           "and the shared ones)")


def readme_block(language, marker):
    """The fenced `language` block of docs/media-urls.md that contains `marker`."""
    with open(os.path.join(ROOT, "docs", "media-urls.md"), encoding="utf-8") as f:
        text = f.read()
    for block in re.findall(r"```" + language + r"\n(.*?)```", text, re.S):
        if marker in block:
            return block
    raise CheckFailed(f"docs/media-urls.md has no {language} block with {marker}")


@check("url")
def the_readmes_helpers_make_the_same_url(world):
    """`pushmedia url`, the docs' ten lines of Python and of Node: the same URL, and it works."""
    source = world.origin.url("/photo.png")
    made = subprocess.run([world.bin, "url", source, "--profile", "ios", "--ext", "jpg", "--origin", world.base,
                           "--url-key", KEY, "--url-salt", SALT], capture_output=True, text=True, timeout=30)
    expect(made.returncode == 0, f"pushmedia url failed: {made.stderr}")
    cli = made.stdout.strip()
    namespace = {}
    exec(readme_block("python", "def media_url"), namespace)
    python = namespace["media_url"](source, KEY, SALT, origin=world.base)
    node = shutil.which("node") or shutil.which("nodejs")
    expect(node is not None, "node is missing (Debian: nodejs)")
    script = readme_block("js", "function mediaURL") + \
        f"\nconsole.log(mediaURL({json.dumps(source)}, {json.dumps(KEY)}, {json.dumps(SALT)}, 'ios', 'jpg', " \
        f"{json.dumps(world.base)}));\n"
    ran = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30)
    expect(ran.returncode == 0, f"the docs' Node helper failed: {ran.stderr}")
    expect(cli == python == ran.stdout.strip(), f"three URLs differ:\n{cli}\n{python}\n{ran.stdout.strip()}")
    status, headers, body = get(cli)
    expect(status == 200 and is_jpeg(body), f"{cli} answered {status} {headers.get('content-type')}")


@check("url")
def curl_saves_it_under_the_extension_asked_for(world):
    """curl -OJ names the file from Content-Disposition, as URLSession's suggestedFilename does:
    a plain URL ending in photo.png@jpg is saved as photo.jpg, and is a JPEG."""
    folder = tempfile.mkdtemp(dir=world.work)
    url = unsigned(world, "/photo.png", "jpg")
    ran = subprocess.run(["curl", "-sS", "-f", "-O", "-J", url], cwd=folder, capture_output=True, text=True,
                         timeout=60)
    expect(ran.returncode == 0, f"curl failed: {ran.stderr}")
    expect(os.listdir(folder) == ["photo.jpg"], f"curl saved {os.listdir(folder)}")
    with open(os.path.join(folder, "photo.jpg"), "rb") as f:
        expect(is_jpeg(f.read()), "photo.jpg is not a JPEG")


@check("url")
def chromium_shows_them_as_images(world):
    """Headless Chromium loads each as an <img> (decoded: naturalWidth > 0)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    expect(chromium is not None, "chromium is missing (Debian: chromium)")
    urls = [unsigned(world, "/banner", "jpg"), unsigned(world, "/photo.png", "png"),
            unsigned(world, "/spinner.gif", "gif"), unsigned(world, "/portrait.heic", "jpg"),
            unsigned(world, "/photo.jpg", "jpg", profile="android")]
    images = "".join(f'<img id="i{n}" src="{u}">' for n, u in enumerate(urls))
    page = os.path.join(world.work, "page.html")
    with open(page, "w") as f:
        f.write(f"""<!doctype html><html><body>{images}<pre id="out"></pre><script>
window.addEventListener("load", () => {{
  document.getElementById("out").textContent = JSON.stringify(
    [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]));
}});
</script></body></html>""")
    ran = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={os.path.join(world.work, 'chromium')}",
                          "--virtual-time-budget=30000", "--dump-dom", "file://" + page],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="out">(.*?)</pre>', ran.stdout, re.S)
    expect(found and found.group(1), f"Chromium wrote no result: {ran.stderr[-500:]}")
    sizes = json.loads(found.group(1).replace("&quot;", '"'))
    for url, (complete, width, height) in zip(urls, sizes):
        expect(complete and width > 0 and height > 0, f"{url}: not shown ({width}×{height})")
    android = sizes[-1]
    expect(android[1] == 2 * android[2], f"the android image is {android[1]}×{android[2]}, not 2:1")


@check("cdn")
def a_cdn_in_front_fetches_a_new_campaign_image_once(world):
    """200 phones at once ask a caching nginx for a new campaign's media URL: one origin fetch,
    200 identical JPEGs, answered within nginx's 5 s cache lock."""
    cdn = world.nginx
    path = f"/campaign-{int(time.time() * 1000)}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.3)
    url = f"{cdn}/insecure/pr:ios/plain/{world.origin.url(path)}@jpg"

    def fetch(_):
        started = time.monotonic()
        status, headers, body = get(url, timeout=60)
        return status, headers.get("content-type"), hashlib.sha256(body).hexdigest(), time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        results = list(pool.map(fetch, range(200)))
    statuses = {r[0] for r in results}
    expect(statuses == {200}, f"statuses {sorted(statuses)}")
    expect({r[1] for r in results} == {"image/jpeg"}, f"types {set(r[1] for r in results)}")
    expect(len({r[2] for r in results}) == 1, f"{len({r[2] for r in results})} different bodies")
    expect(world.origin.hits(path) == 1, f"{world.origin.hits(path)} origin fetches for 200 phones")
    slowest = max(r[3] for r in results)
    print(f"     cdn: 200 fetches, 1 origin fetch, slowest answer {slowest:.2f}s")
    # And the next phone is answered by the CDN itself.
    status, headers, _ = get(url)
    expect(status == 200 and headers.get("x-cache-status") == "HIT", f"then {status} {headers.get('x-cache-status')}")


@check("hostile")
def hostile_requests_over_http(world):
    """What a real HTTP stack sends: dot segments kept, a 20 KB path, a source outside the
    allow-list, a stalled origin (307 to the source at the budget, the file afterwards)."""
    status, _, body = get(f"{world.base}/insecure/pr:ios/plain/{world.origin.base}/a/../photo.jpg@jpg")
    expect(status == 400 and b"invalid_source" in body, f"dot segments: {status} {body[:200]!r}")
    status, _, body = get(unsigned(world, "/" + "a" * 20_000))
    expect(status == 414, f"a 20 KB path: {status}")
    status, _, body = get(f"{world.base}/insecure/pr:ios/plain/http://{world.origin.base[7:]}.evil.example/x@jpg")
    expect(status in (400, 403), f"a longer host: {status} {body[:200]!r}")
    status, headers, _ = get(unsigned(world, "/slow"), follow=False)
    expect(status == 307 and headers.get("location") == world.origin.url("/slow"),
           f"a stalled origin: {status} {headers.get('location')}")
    deadline = time.monotonic() + 30
    while True:
        status, headers, body = get(unsigned(world, "/slow"), follow=False)
        if status == 200 or time.monotonic() > deadline:
            break
    expect(status == 200 and is_jpeg(body), f"after the stall: {status}")
    expect(world.origin.hits("/slow") == 1, f"{world.origin.hits('/slow')} fetches of the stalled source")


def main():
    return run_checks(CHECKS, World, __doc__, work_prefix="media-url-test-", default_timeout=600,
                      title="media_url_test")


if __name__ == "__main__":
    sys.exit(main())
