#!/usr/bin/env python3
"""The image's libvips and FFmpeg (built with only what PushMedia uses) against the host's
(Debian's, with everything): the same payloads, the same outcomes.

  parity.py corpus DIR          samples/ (payloads and media) plus the formats samples/ lacks
                                (MOV, AVI, MPEG-PS, FLAC, AIFF, AAC, Ogg), made by the host's ffmpeg
  parity.py compare A B         two `pushmedia batch` report.json files: every payload's status,
                                reason, source type, attachment type and dimensions must agree
"""
import json
import pathlib
import shutil
import subprocess
import sys

# name, ffmpeg input (lavfi), output options: the corpus formats samples/ does not hold.
EXTRA = [
    ("clip.mov", "testsrc=s=640x360:d=2:r=15", ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-f", "mov"]),
    ("clip.avi", "testsrc=s=640x360:d=2:r=15", ["-c:v", "mpeg4", "-f", "avi"]),
    ("clip.mpg", "testsrc=s=640x360:d=2:r=25", ["-c:v", "mpeg2video", "-f", "vob"]),
    ("tone.flac", "sine=f=440:d=2", ["-c:a", "flac"]),
    ("tone.aiff", "sine=f=440:d=2", ["-c:a", "pcm_s16be", "-f", "aiff"]),
    ("tone.aac", "sine=f=440:d=2", ["-c:a", "aac", "-f", "adts"]),
    ("tone.ogg", "sine=f=440:d=2", ["-c:a", "libvorbis", "-f", "ogg"]),
]


def corpus(directory: pathlib.Path) -> None:
    samples = pathlib.Path(__file__).resolve().parents[2] / "samples"
    shutil.copytree(samples, directory)
    for name, source, options in EXTRA:
        subprocess.run(
            ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", source, *options,
             str(directory / "media" / name)], check=True)
        payload = {"aps": {"alert": {"title": name, "body": "parity"}, "mutable-content": 1},
                   "media_url": "media/" + name}
        (directory / f"parity-{name}.json").write_text(json.dumps(payload))


def facts(report: pathlib.Path) -> dict:
    items = json.loads(report.read_text())["items"]
    found = {}
    for item in items:
        outcome = item["outcome"]
        attachment = outcome.get("attachment") or {}
        found[item["file"]] = {
            "status": outcome.get("status"), "reason": outcome.get("reason"),
            "source": outcome.get("source_mime"), "mime": attachment.get("mime"),
            "width": attachment.get("width"), "height": attachment.get("height"),
        }
    return found


def compare(a: pathlib.Path, b: pathlib.Path) -> int:
    left, right = facts(a), facts(b)
    differences = []
    for name in sorted(set(left) | set(right)):
        if left.get(name) != right.get(name):
            differences.append(f"{name}: {left.get(name)} != {right.get(name)}")
    attachments = sum(1 for fact in left.values() if fact["mime"])
    if differences:
        print(f"parity: {len(differences)} of {len(left)} payloads differ:", *differences, sep="\n  ", file=sys.stderr)
        return 1
    if attachments < len(EXTRA):
        print(f"parity: only {attachments} attachments: the corpus did not run", file=sys.stderr)
        return 1
    print(f"parity: {len(left)} payloads agree ({attachments} attachments)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "corpus":
        corpus(pathlib.Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
