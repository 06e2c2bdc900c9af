#!/usr/bin/env python3
"""Writes the URL lists and payload directories the contenders read (bench/run.sh calls it).

  lists.py OUT CORPUS_DIR ORIGIN_URL THUMBOR_URL MEM_ITEMS MEM_VIDEOS

OUT/lists/urls.txt            every corpus item's origin URL (urls-<format>.txt per format)
OUT/lists/paths.txt           every corpus item's local path (paths-<format>.txt per format)
OUT/lists/thumbor.txt         thumbor's URL for each item: fit-in 2048x2048, JPEG, quality 82
OUT/payloads/all/NNN.json     one push payload per corpus item (payloads/<format>/ per format)
OUT/payloads/mem/NNNN.json    MEM_ITEMS payloads for the memory test: the corpus repeated, each
                              with a distinct query string (so each is fetched and transcoded
                              anew), plus MEM_VIDEOS payloads naming the 45 MB MP4 (also distinct)
"""
import json
import os
import shutil
import sys


def payload(url, n):
    return json.dumps({"aps": {"alert": {"title": "Bench", "body": f"Item {n}"}, "mutable-content": 1},
                       "media_url": url, "campaign": "bench"}) + "\n"


def write_dir(path, urls):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    width = max(3, len(str(len(urls))))
    for n, url in enumerate(urls):
        with open(os.path.join(path, f"{n:0{width}d}.json"), "w") as f:
            f.write(payload(url, n))


def main():
    out, corpus, origin, thumbor, mem_items, mem_videos = sys.argv[1:7]
    mem_items, mem_videos = int(mem_items), int(mem_videos)
    with open(os.path.join(corpus, "manifest.json")) as f:
        manifest = json.load(f)
    items = manifest["items"]
    lists = os.path.join(out, "lists")
    os.makedirs(lists, exist_ok=True)
    host = origin.split("://", 1)[1]

    def write(name, lines):
        with open(os.path.join(lists, name), "w") as f:
            f.write("".join(line + "\n" for line in lines))

    urls = [f"{origin}/{it['name']}" for it in items]
    write("urls.txt", urls)
    write("paths.txt", [os.path.join(corpus, it["name"]) for it in items])
    write("thumbor.txt", [f"{thumbor}/unsafe/fit-in/2048x2048/filters:quality(82):format(jpeg)/{host}/{it['name']}" for it in items])
    write_dir(os.path.join(out, "payloads", "all"), urls)
    formats = sorted({it["format"] for it in items})
    for fmt in formats:
        sel = [it for it in items if it["format"] == fmt]
        write(f"urls-{fmt}.txt", [f"{origin}/{it['name']}" for it in sel])
        write(f"paths-{fmt}.txt", [os.path.join(corpus, it["name"]) for it in sel])
        write_dir(os.path.join(out, "payloads", fmt), [f"{origin}/{it['name']}" for it in sel])
    write("formats.txt", formats)

    # Memory test: videos spread evenly among the images.
    video = f"{origin}/{manifest['video']['name']}"
    mem = []
    images = mem_items - mem_videos
    every = max(1, mem_items // max(1, mem_videos))
    v = i = 0
    for n in range(mem_items):
        if v < mem_videos and n % every == every // 2:
            mem.append(f"{video}?mem=v{v}")
            v += 1
        else:
            mem.append(f"{urls[i % len(urls)]}?mem={i}")
            i += 1
    assert i == images and v == mem_videos, (i, v)
    write_dir(os.path.join(out, "payloads", "mem"), mem)
    with open(os.path.join(lists, "mem.json"), "w") as f:
        json.dump({"items": mem_items, "videos": mem_videos, "video_bytes": manifest["video"]["bytes"],
                   "largest_image_px": max(it["width"] * it["height"] for it in items)}, f)


if __name__ == "__main__":
    main()
