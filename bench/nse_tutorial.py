#!/usr/bin/env python3
"""What most "prepare rich-push media on your server" tutorials do, as a baseline:
requests to download, python-magic to check the type, Pillow (+ pillow-heif for HEIC) to
decode, auto-rotate, fit the long edge into 2048 px and save a JPEG at quality 82.

Usage: nse_tutorial.py URL_LIST OUT_DIR [--processes 2]
Prints one JSON line per item to stdout: {"url", "ok", "mime", "w", "h", "bytes"|"error"}.
"""
import argparse
import hashlib
import io
import json
import os
import sys
from multiprocessing import Pool

import magic
import requests
from PIL import Image, ImageOps
from pillow_heif import register_heif_opener

register_heif_opener()
ALLOWED = {"image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "image/heif"}
session = None
out_dir = None


def init(directory):
    global session, out_dir
    session = requests.Session()
    out_dir = directory


def process(url):
    try:
        r = session.get(url, timeout=60)
        r.raise_for_status()
        data = r.content
        mime = magic.from_buffer(data[:4096], mime=True)
        if mime not in ALLOWED:
            return {"url": url, "ok": False, "error": f"unsupported type {mime}"}
        image = Image.open(io.BytesIO(data))
        image = ImageOps.exif_transpose(image)
        if image.mode != "RGB":
            image = image.convert("RGB")
        image.thumbnail((2048, 2048), Image.LANCZOS)
        buf = io.BytesIO()
        image.save(buf, "JPEG", quality=82, optimize=True)
        name = hashlib.sha256(buf.getvalue()).hexdigest() + ".jpg"
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(buf.getvalue())
        return {"url": url, "ok": True, "mime": mime, "w": image.width, "h": image.height, "bytes": buf.tell()}
    except Exception as e:  # a tutorial script logs and goes on
        return {"url": url, "ok": False, "error": f"{type(e).__name__}: {e}"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("urls")
    ap.add_argument("out")
    ap.add_argument("--processes", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(a.urls) as f:
        urls = [line.strip() for line in f if line.strip()]
    failed = 0
    with Pool(a.processes, initializer=init, initargs=(a.out,)) as pool:
        for result in pool.imap_unordered(process, urls):
            failed += not result["ok"]
            print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
