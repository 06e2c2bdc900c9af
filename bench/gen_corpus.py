#!/usr/bin/env python3
"""Deterministic benchmark corpus: photo-like images of mixed sizes (up to 50 MP) and formats.

Usage: gen_corpus.py OUT_DIR [--count N] [--jobs J]

Every image is synthesised by libvips (through pyvips) from fixed seeds: a graded sky with a
sun glow, rolling hills, cloud-like low-frequency texture, mid-frequency detail and fine grain,
so that encoders and decoders see photo-like statistics (JPEG of a 12 MP item is a few MB).
The item list (size, format, seed) comes from random.Random(SPEC_SEED), so the same command
always writes the same files; OUT_DIR/manifest.json lists them with their SHA-256. Files that
already exist with the right size in the manifest are kept (re-running is cheap).

Also writes OUT_DIR/video-45mb.mp4: a tiny real MP4 (ffmpeg, one thread) padded with zeros to
45,000,000 bytes, for the memory test (PushMedia passes video through up to 50 MB).
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

SPEC_SEED = 20240611
FULL_COUNT = 200

# (width, height) landscape; every long edge is over 2048 so that every contender transcodes
# every item (PushMedia passes small compliant JPEG/PNG/GIF through, which would not be the
# same work).
SIZES = [
    (2400, 1600),   # 3.8 MP
    (3000, 2000),   # 6.0 MP
    (3264, 2448),   # 8.0 MP
    (4032, 3024),   # 12.2 MP (phone)
    (4624, 3468),   # 16.0 MP
    (5472, 3648),   # 20.0 MP
    (6000, 4000),   # 24.0 MP
    (7008, 4672),   # 32.7 MP
    (8160, 6120),   # 49.9 MP (just under PushMedia's 50,000,000-pixel cap)
]
# How many items of each format in the full corpus, and the largest size index each may use
# (big PNG would pass 50 MB, big HEIC/WebP/GIF take too long to encode).
FORMATS = [
    # fmt, count, max size index, weights over allowed sizes
    ("jpeg", 90, 8, [6, 8, 10, 22, 10, 8, 8, 6, 12]),
    ("webp", 35, 6, [6, 8, 10, 20, 8, 6, 4]),
    ("heic", 30, 3, [6, 8, 10, 20]),
    ("png", 30, 3, [8, 8, 10, 12]),
    ("gif", 15, 1, [10, 6]),
]
EXT = {"jpeg": "jpg", "webp": "webp", "heic": "heic", "png": "png", "gif": "gif"}


def build_spec():
    """The full, fixed list of items, interleaved so that any prefix mixes formats and sizes."""
    rng = random.Random(SPEC_SEED)
    items = []
    for fmt, count, max_index, weights in FORMATS:
        allowed = SIZES[: max_index + 1]
        for k in range(count):
            w, h = rng.choices(allowed, weights=weights)[0]
            if rng.random() < 0.3:
                w, h = h, w  # portrait
            items.append({
                "format": fmt, "width": w, "height": h, "seed": rng.randrange(1, 2**30),
                "quality": rng.choice([85, 88, 90, 92]) if fmt in ("jpeg", "webp", "heic") else None,
                "palette": rng.randrange(3), "sun_x": round(rng.uniform(0.15, 0.85), 3),
                "sun_y": round(rng.uniform(0.12, 0.4), 3), "horizon": round(rng.uniform(0.5, 0.7), 3),
            })
    rng.shuffle(items)
    # Put a 50 MP JPEG first so that every prefix (QUICK runs) contains the largest case.
    big = next(i for i, it in enumerate(items) if it["format"] == "jpeg" and it["width"] * it["height"] > 45e6)
    items.insert(0, items.pop(big))
    # Make sure the first 20 items hold every format.
    seen = {it["format"] for it in items[:20]}
    for fmt, *_ in FORMATS:
        if fmt not in seen:
            j = next(i for i, it in enumerate(items) if it["format"] == fmt)
            items.insert(1, items.pop(j))
    for n, it in enumerate(items):
        it["name"] = f"{n:03d}-{it['width']}x{it['height']}.{EXT[it['format']]}"
    return items


PALETTES = [
    # sky top, sky bottom, ground near, ground far (RGB)
    ((40, 60, 150), (250, 180, 90), (35, 40, 20), (95, 110, 60)),    # sunset
    ((70, 130, 230), (190, 220, 250), (40, 70, 30), (110, 150, 80)),  # daylight
    ((60, 40, 120), (210, 120, 160), (30, 25, 45), (80, 70, 100)),    # dusk
]


def synth(it):
    """The scene at a quarter of the resolution (everything but the grain is smooth), upsampled,
    plus full-resolution luminance grain from a replicated seeded tile (cheap at 50 MP)."""
    import pyvips

    w, h, seed = it["width"], it["height"], it["seed"]
    sw, sh = (w + 3) // 4, (h + 3) // 4
    top, bottom, near, far = PALETTES[it["palette"]]
    xyz = pyvips.Image.xyz(sw, sh)
    x = xyz[0] / sw
    y = xyz[1] / sh
    # Sky: vertical gradient, sun glow.
    sky = [top[c] + (bottom[c] - top[c]) * y for c in range(3)]
    dx = x - it["sun_x"]
    dy = (y - it["sun_y"]) * (h / w)
    dist = (dx * dx + dy * dy) ** 0.5
    glow = (dist * -9).exp() * 110 + (dist < 0.04).ifthenelse(255, 0)
    # Hills: horizon line from a few sines of x.
    horizon = it["horizon"] + (x * 6.3 + seed % 7).sin() * 0.045 + (x * 23.0 + seed % 5).sin() * 0.018
    ground = [far[c] + (near[c] - far[c]) * ((y - horizon) / (1.0 - horizon)) for c in range(3)]

    def smooth_noise(scale, sigma, s):
        nw, nh = max(2, sw // scale + 2), max(2, sh // scale + 2)
        n = pyvips.Image.gaussnoise(nw, nh, sigma=sigma, mean=0, seed=s)
        return n.resize(scale, kernel="linear").crop(0, 0, sw, sh)

    clouds = smooth_noise(24, 30, seed)       # very low frequency
    detail = pyvips.Image.gaussnoise(sw, sh, sigma=12, mean=0, seed=seed + 1)  # mid frequency
    is_ground = y > horizon
    bands = []
    for c in range(3):
        sk = sky[c] + glow * (1.0, 0.8, 0.5)[c] + clouds * 0.6
        gr = ground[c] + detail * 1.4 + clouds * 0.3
        bands.append(is_ground.ifthenelse(gr, sk))
    small = bands[0].bandjoin(bands[1:]).cast("uchar")
    # Materialise the small scene once, then upsample to the full size.
    small = pyvips.Image.new_from_memory(small.write_to_memory(), sw, sh, 3, "uchar")
    # Bilinear ×2, then nearest ×2: a full-size bilinear ×4 costs seconds at 50 MP; the 2×2
    # blocks vanish under the grain.
    big = small.resize(2, kernel="linear").zoom(2, 2).crop(0, 0, w, h)
    tile = pyvips.Image.gaussnoise(509, 509, sigma=3.5, mean=0, seed=seed + 2).cast("char")
    grain = tile.replicate((w + 508) // 509, (h + 508) // 509).crop(0, 0, w, h)
    img = big.cast("short").add(grain).cast("uchar")  # clips to 0..255
    return img.copy(interpretation="srgb")


def make(args):
    it, out_dir = args
    path = os.path.join(out_dir, it["name"])
    if os.path.exists(path) and os.path.getsize(path) > 0:
        return it["name"], path
    img = synth(it)
    tmp = path + ".part"
    fmt = it["format"]
    if fmt == "jpeg":
        img.jpegsave(tmp, Q=it["quality"], strip=True)
    elif fmt == "webp":
        img.webpsave(tmp, Q=it["quality"], strip=True, effort=2)
    elif fmt == "heic":
        # libvips' heifsave drives x265 at its slow default preset (minutes per 12 MP image);
        # pillow-heif's bundled x265 takes a preset.
        from PIL import Image
        import pillow_heif
        pil = Image.frombytes("RGB", (img.width, img.height), img.write_to_memory())
        pillow_heif.from_pillow(pil).save(tmp, format="HEIF", quality=it["quality"] - 25,
                                          enc_params={"preset": "ultrafast"})
    elif fmt == "png":
        img.pngsave(tmp, compression=6, strip=True)
    elif fmt == "gif":
        img.gifsave(tmp, effort=1, strip=True)
    os.replace(tmp, path)
    return it["name"], path


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_video(out_dir, size=45_000_000):
    path = os.path.join(out_dir, "video-45mb.mp4")
    if os.path.exists(path) and os.path.getsize(path) == size:
        return path
    tmp = path + ".small.mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-threads", "1",
                    "-f", "lavfi", "-i", "testsrc=size=320x240:rate=10:duration=1",
                    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                    "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1",
                    "-movflags", "+faststart", tmp], check=True)
    with open(tmp, "rb") as f:
        data = f.read()
    os.unlink(tmp)
    with open(path + ".part", "wb") as f:
        f.write(data)
        f.truncate(size)  # zeros after the real MP4
    os.replace(path + ".part", path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=FULL_COUNT)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    spec = build_spec()[: a.count]
    # Biggest first so the pool stays busy till the end.
    order = sorted(spec, key=lambda it: -(it["width"] * it["height"] * (4 if it["format"] in ("heic", "webp") else 1)))
    os.environ.setdefault("VIPS_CONCURRENCY", "1")
    done = 0
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for name, _ in pool.map(make, [(it, a.out) for it in order]):
            done += 1
            print(f"\r  corpus {done}/{len(spec)} {name}        ", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    video = make_video(a.out)
    manifest = []
    for it in spec:
        p = os.path.join(a.out, it["name"])
        manifest.append(dict(it, bytes=os.path.getsize(p), sha256=sha256(p)))
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"spec_seed": SPEC_SEED, "items": manifest,
                   "video": {"name": os.path.basename(video), "bytes": os.path.getsize(video), "sha256": sha256(video)}},
                  f, indent=1)
    by_fmt = {}
    for m in manifest:
        d = by_fmt.setdefault(m["format"], [0, 0, 0])
        d[0] += 1
        d[1] += m["bytes"]
        d[2] += m["width"] * m["height"]
    for fmt, (n, b, px) in sorted(by_fmt.items()):
        print(f"  {fmt:5s} {n:4d} items  {b / 1e6:8.1f} MB  {px / n / 1e6:5.1f} MP avg", file=sys.stderr)


if __name__ == "__main__":
    main()
