#!/usr/bin/env python3
"""What libjpeg's optimize_coding buys: the same decoded pixels encoded with and without it.

    bench/.venv/bin/python bench/optimize_coding.py [CORPUS] [ITEMS]

For the first ITEMS (default 60) images of the corpus (bench/out/corpus, made by gen_corpus.py),
each is fitted into 2048 px and into 512 px (PushMedia's attachment and thumbnail), flattened to
sRGB, held in memory, then JPEG-encoded at Q 82 without metadata twice: optimize_coding off and
on. Prints the bytes of each and the encode CPU time (this process's, so other load on the
machine barely changes it). Run with VIPS_CONCURRENCY=1, as PushMedia runs libvips.
"""
import os
import sys
import time

import pyvips


def main() -> None:
    corpus = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out", "corpus")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    names = sorted(f for f in os.listdir(corpus) if f[:3].isdigit() and not f.endswith(".mp4"))[:count]
    rows = []
    for name in names:
        path = os.path.join(corpus, name)
        for edge in (2048, 512):
            image = pyvips.Image.thumbnail(path, edge, height=edge, size="down")
            if image.hasalpha():
                image = image.flatten(background=[255, 255, 255])
            image = image.colourspace("srgb").copy_memory()
            started = time.process_time()
            plain = image.jpegsave_buffer(Q=82, optimize_coding=False, strip=True)
            middle = time.process_time()
            optimized = image.jpegsave_buffer(Q=82, optimize_coding=True, strip=True)
            ended = time.process_time()
            rows.append((edge, len(plain), len(optimized), middle - started, ended - middle))
    for edge in (2048, 512):
        r = [row for row in rows if row[0] == edge]
        plain = sum(row[1] for row in r)
        optimized = sum(row[2] for row in r)
        plain_cpu = sum(row[3] for row in r)
        optimized_cpu = sum(row[4] for row in r)
        saved = sorted((1 - row[2] / row[1]) * 100 for row in r)
        print(
            f"edge {edge}: {len(r)} images, plain {plain / 1e6:.2f} MB, optimized {optimized / 1e6:.2f} MB, "
            f"saved {(1 - optimized / plain) * 100:.1f}% (per image min {saved[0]:.1f}%, median "
            f"{saved[len(saved) // 2]:.1f}%, max {saved[-1]:.1f}%), {(plain - optimized) / len(r) / 1e3:.1f} kB "
            f"per image; encode CPU {plain_cpu / len(r) * 1000:.1f} ms plain, "
            f"{optimized_cpu / len(r) * 1000:.1f} ms optimized per image"
        )


if __name__ == "__main__":
    main()
