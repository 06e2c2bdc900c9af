#!/usr/bin/env python3
"""Regenerates the seed corpora under fuzz/corpus/ (payload: JSON; media: small file heads;
h2: HTTP/2 frames from a client or a server).

Run from the repository root: python3 fuzz/make-corpus.py. Needs samples/media/ and, for a few
extra images, `vips` (skipped when missing). Deterministic, so re-running changes nothing.
"""
import json, os, struct, subprocess, tempfile, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAYLOAD = os.path.join(ROOT, "fuzz", "corpus", "payload")
MEDIA = os.path.join(ROOT, "fuzz", "corpus", "media")
H2 = os.path.join(ROOT, "fuzz", "corpus", "h2")
SAMPLES = os.path.join(ROOT, "samples", "media")
HEAD = 8 * 1024


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def aps(alert=None, **extra):
    out = {}
    if alert is not None:
        out["alert"] = alert
    out.update(extra)
    return out


ALERT = {"title": "Spring deals", "body": "Up to 40% off"}

# ---------------------------------------------------------------------------------------- payload


def payloads():
    p = {}
    p["contract.json"] = ('{"aps": {"alert": {"title": "Spring deals", "body": "Up to 40% off"}, "mutable-content": 1},\n'
                          ' "media_url": "https://cdn.shop.example/banner",\n "deep_link": "shop://deals/42"}\n')
    for i, key in enumerate(["media_url", "image_url", "imageUrl", "mediaUrl", "attachment-url"]):
        p[f"key-{key}.json"] = compact({"aps": aps(ALERT, **{"mutable-content": 1}), key: f"https://cdn.example.com/m/{i}.webp"})
    p["key-extra-media.json"] = compact({"aps": aps("Hi"), "media": "https://cdn.example.com/a.heic", "x": 1})
    p["two-keys-order.json"] = compact({"aps": aps(ALERT), "imageUrl": "https://a.example/1.png", "media_url": "https://a.example/2.png"})
    p["alert-string.json"] = compact({"aps": aps("Your order shipped", sound="default", badge=3), "image_url": "https://img.example/o/77"})
    p["alert-empty.json"] = compact({"aps": aps("", **{"mutable-content": 0}), "media_url": "https://x.example/y"})
    p["alert-empty-object.json"] = compact({"aps": aps({}), "media_url": "https://x.example/y"})
    p["no-alert-background.json"] = compact({"aps": {"content-available": 1}, "media_url": "media/banner.webp", "sync": "catalog"})
    p["no-media.json"] = compact({"aps": aps(ALERT), "deep_link": "shop://home", "campaign": {"id": "c1", "variant": "a"}})
    p["media-not-string.json"] = compact({"aps": aps(ALERT), "media_url": {"url": "https://cdn.example.com/x.jpg", "w": 640}})
    p["media-null.json"] = '{"aps":{"alert":"x"},"media_url":null,"attachment-url":[1,2,3]}'
    p["mutable-content-spellings.json"] = '{"aps":{"alert":"x","mutable-content":1.0},"media_url":"a","x":{"mutable-content":"1"}}'
    p["aps-not-object.json"] = '{"aps":"alert","media_url":"https://cdn.example.com/i.png"}'
    p["numbers.json"] = ('{"aps":{"alert":"n","badge":-0},"media_url":"u","a":1.0,"b":1e3,"c":-0,"d":1E+3,"e":-1.5e-10,'
                         '"f":12345678901234567890123,"g":0.000001,"h":[0,-0.0,1e-0,2E-2]}')
    p["unicode.json"] = compact({"aps": aps({"title": "Dernière chance : soldes d'été 🎉", "body": "日本語のテキスト ✓ — ünïcødé"}),
                                 "image_url": "https://cdn.example.com/café/ß.jpg", "emoji": "👩‍👩‍👧‍👦",
                                 "e\u0301": "decomposed", "é": "composed"})
    p["escapes.json"] = ('{"aps":{"alert":{"title":"Quote \\" backslash \\\\ slash \\/","body":"tab\\tnl\\ncr\\rbs\\bff\\f"}},'
                         '"media_url":"https:\\/\\/cdn.example.com\\/a b.jpg","ctl":"\\u0000\\u001f\\u007f",'
                         '"pair":"\\ud83d\\ude00","bmp":"\\u00e9\\u4e2d","upper":"\\u00C9"}')
    p["whitespace.json"] = '\n\t {\r\n  "aps" : { "alert" : "ws" } ,\n  "media_url" :\t"x"  } \n\n'
    p["vendor-nesting.json"] = compact({
        "aps": aps({"title-loc-key": "T", "loc-args": ["a", "b"], "subtitle": "s"}, category="promo", **{"thread-id": "t1", "mutable-content": 1}),
        "data": {"fcm": {"notification": {"image": "https://x.example/i.png"}}, "braze": {"ab": [{"k": "v"}, {"k": [1, [2, [3]]]}]}},
        "onesignal": {"att": {"id": "https://os.example/1.jpg"}, "custom": {"i": "abc", "a": {"deep": True, "none": None}}},
        "attachment-url": "https://ab.example/x.gif", "pushmedia": {"v": 0, "status": "old"}})
    p["existing-pushmedia.json"] = compact({"aps": aps(ALERT), "pushmedia": "stale", "media_url": "https://cdn.example.com/z.jpg"})
    deep = "x"
    for i in range(40):
        deep = {"l": deep} if i % 2 else [deep]
    p["deep-40.json"] = compact({"aps": aps("deep"), "media_url": "https://d.example/1.jpg", "deep": deep})
    p["deep-128.json"] = '{"aps":{"alert":"d"},"media_url":"u","deep":' + "[" * 126 + "]" * 126 + "}"
    p["deep-129-too-deep.json"] = '{"a":' + "[" * 128 + "]" * 128 + "}"
    many = {"aps": aps("many keys")}
    for i in range(30):
        many[f"k{i:02}"] = i
    many["media_url"] = "https://m.example/m.png"
    p["many-keys.json"] = compact(many)
    # Near APNs' 4096-byte limit: the descriptor has to be trimmed, or dropped.
    for size in (3900, 4060, 4096):
        body = {"aps": aps({"title": "Near the limit", "body": ""}, **{"mutable-content": 1}), "media_url": "https://cdn.example.com/p/near.webp", "deep_link": "app://x"}
        body["aps"]["alert"]["body"] = "x" * (size - len(compact(body).encode()))
        p[f"near-limit-{size}.json"] = compact(body)
    big = {"aps": aps("over"), "media_url": "https://cdn.example.com/o.png", "pad": "y" * 4100}
    p["over-limit.json"] = compact(big)
    # Invalid ones: the parser's error paths.
    p["invalid-trailing-comma.json"] = '{"aps":{"alert":{"title":"t","body":"b",},"mutable-content":1},"media_url":"m"'
    p["invalid-duplicate-key.json"] = '{"aps":{"alert":"x"},"media_url":"a","media_url":"b"}'
    p["invalid-lone-surrogate.json"] = '{"aps":{"alert":"\\ud800x"},"media_url":"\\udc00"}'
    p["invalid-number.json"] = '{"a":01,"b":1.,"c":-,"d":.5,"e":1e}'
    p["invalid-utf8.json"] = b'{"aps":{"alert":"\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80"},"media_url":"x"}'
    p["invalid-bom.json"] = b"\xef\xbb\xbf" + compact({"aps": aps("bom"), "media_url": "x"}).encode()
    p["invalid-control-char.json"] = '{"aps":{"alert":"line\nbreak"},"media_url":"x"}'
    p["invalid-trailing-data.json"] = '{"aps":{"alert":"x"}} {"media_url":"y"}'
    p["scalars.json"] = '"just a string"'
    # Push vendors' shapes, including broken ones (wrong kinds where objects are expected).
    p["vendor-fcm-message.json"] = compact({"message": {"token": "t", "notification": {"title": "T", "body": "B", "image": "https://f.example/a.webp"},
                                                        "apns": {"payload": {"aps": {"sound": "s"}}}, "android": {"notification": {}},
                                                        "webpush": {"notification": {"image": "https://f.example/w.png"}}}})
    p["vendor-fcm-broken-parts.json"] = compact({"message": {"notification": {"image": "https://f.example/a.jpg"}, "apns": {"fcm_options": "x", "payload": []},
                                                             "android": {"notification": "n"}, "webpush": {}}})
    p["vendor-fcm-bare.json"] = compact({"token": "t", "notification": {"title": "T", "image": "https://f.example/b.jpg"}, "android": {}})
    p["vendor-fcm-apns.json"] = compact({"aps": aps(ALERT, **{"mutable-content": 1}), "fcm_options": {"image": "https://f.example/c.heic"}})
    p["vendor-onesignal.json"] = compact({"aps": aps(ALERT), "att": {"a": "https://o.example/1.jpg", "b": 7, "": "https://o.example/2.png"}})
    p["vendor-onesignal-os-data.json"] = compact({"aps": aps(ALERT), "os_data": {"att": {"x": "https://o.example/3.gif"}}})
    p["vendor-airship.json"] = compact({"aps": aps(ALERT), "com.urbanairship.media_attachment": {
        "url": ["https://u.example/1.jpg", {"no": 1}, "https://u.example/2.jpg"], "urls": [{"url": "https://u.example/3.png", "url_id": "i"}, "bad"],
        "thumbnail_id": "i", "options": {"crop": {"x": 0.1, "y": 0, "width": 0.8, "height": 1}, "time": 1.5, "hidden": True}}})
    p["vendor-braze.json"] = compact({"aps": aps(ALERT), "ab": {"att": {"url": "https://b.example/x", "type": "png"}, "c": "c1"}})
    p["vendor-clevertap.json"] = compact({"aps": aps(ALERT), "ct_mediaUrl": "https://c.example/g", "ct_mediaType": "image"})
    p["vendor-iterable-cio.json"] = compact({"aps": aps(ALERT), "itbl": {"attachment-url": "https://i.example/t.tiff"},
                                             "CIO": {"push": {"image": "https://c.example/b.bmp"}}})
    return p


# ------------------------------------------------------------------------------------------ media


def sample(name, n=HEAD):
    with open(os.path.join(SAMPLES, name), "rb") as f:
        return f.read(n)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def tiny_png(w, h, color_type=2):
    bands = {0: 1, 2: 3, 6: 4}[color_type]
    raw = b"".join(b"\x00" + bytes([(x * 40 + y * 7) & 255 for x in range(w * bands)]) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def bmp(width, height, bits=24, compression=0, header=40, masks=None, palette=0, top_down=False):
    row = ((width * bits + 31) // 32) * 4
    extra = b""
    if masks is not None and header == 40:
        extra = b"".join(struct.pack("<I", m) for m in masks[:3])
    pal = b"".join(bytes([i, 255 - i, (i * 3) & 255, 0]) for i in range(palette))
    info = struct.pack("<IiiHHIIiiII", header, width, -height if top_down else height, 1, bits, compression, row * height, 2835, 2835, palette, 0)
    if header > 40:
        rest = b""
        if masks is not None:
            rest = b"".join(struct.pack("<I", m) for m in masks)
        info += (rest + b"\x00" * header)[: header - 40]
    offset = 14 + len(info) + len(extra) + len(pal)
    pixels = bytes((i * 37) & 255 for i in range(row * height))
    data = info + extra + pal + pixels
    return b"BM" + struct.pack("<IHHI", 14 + len(data), 0, 0, offset) + data


def wav_head():
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    data = bytes(range(256)) * 2
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data)) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data


def vips_image(suffix, options=""):
    """A tiny image written by `vips`, or None without it."""
    try:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "o" + suffix + options)
            subprocess.run(["vips", "black", out, "12", "9", "--bands", "3"], check=True, capture_output=True)
            with open(os.path.join(d, "o" + suffix), "rb") as f:
                return f.read()
    except (OSError, subprocess.CalledProcessError):
        return None


def media():
    m = {}
    m["empty"] = b""
    m["one-byte"] = b"\xff"
    for name, src in [("jpeg-exif-head.jpg", "photo-exif.jpg"), ("png-alpha-head.png", "logo-alpha.png"),
                      ("gif-animated-head.gif", "spinner.gif"), ("webp-head.webp", "banner.webp"),
                      ("heic-head.heic", "portrait.heic"), ("avif.avif", "sunset.avif"), ("tiff-head.tiff", "scan.tiff"),
                      ("bmp-head.bmp", "diagram.bmp"), ("mp3-head.mp3", "chime.mp3"), ("wav-head.wav", "bell.wav"),
                      ("mp4.mp4", "clip.mp4"), ("webm.webm", "clip.webm"), ("m4a.m4a", "ping.m4a"),
                      ("png-named-jpg-head.png", "really-a-png.jpg"), ("jpeg-truncated-head.jpg", "truncated.jpg")]:
        m[name] = sample(src)
    m["jpeg-soi-only.jpg"] = sample("photo-exif.jpg", 4)
    m["png-1x1.png"] = tiny_png(1, 1)
    m["png-7x5-rgba.png"] = tiny_png(7, 5, 6)
    m["png-4x3-gray.png"] = tiny_png(4, 3, 0)
    m["png-huge-dims.png"] = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
                              + png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + png_chunk(b"IEND", b""))
    m["gif-1x1.gif"] = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")
    m["bmp-24-3x2.bmp"] = bmp(3, 2)
    m["bmp-24-top-down.bmp"] = bmp(5, 3, top_down=True)
    m["bmp-32-rgb.bmp"] = bmp(2, 2, bits=32)
    m["bmp-32-bitfields-alpha.bmp"] = bmp(3, 3, bits=32, compression=3, header=56, masks=[0xFF0000, 0xFF00, 0xFF, 0xFF000000])
    m["bmp-32-bitfields-v3.bmp"] = bmp(2, 3, bits=32, compression=3, header=40, masks=[0xFF, 0xFF00, 0xFF0000])
    m["bmp-32-v5.bmp"] = bmp(2, 2, bits=32, compression=3, header=124, masks=[0xFF0000, 0xFF00, 0xFF, 0xFF000000])
    m["bmp-8-paletted.bmp"] = bmp(4, 4, bits=8, palette=16)
    m["bmp-8-full-palette.bmp"] = bmp(3, 2, bits=8, palette=256)
    m["bmp-rle8-unsupported.bmp"] = bmp(4, 2, bits=8, compression=1, palette=2)
    m["bmp-huge-dims.bmp"] = bmp(1, 1)[:18] + struct.pack("<ii", 100000, 100000) + bmp(1, 1)[26:]
    m["bmp-truncated.bmp"] = bmp(16, 16)[:80]
    m["wav-tiny.wav"] = wav_head()
    m["svg.svg"] = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="red"/></svg>\n'
    m["pdf.pdf"] = b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Count 0/Kids[]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    m["html.html"] = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n"
    m["json.json"] = b'{"error":"not found"}\n'
    m["gzip.gz"] = bytes.fromhex("1f8b0800000000000003") + zlib.compress(b"hello")[2:-4] + struct.pack("<II", zlib.crc32(b"hello"), 5)
    for name, suffix, options in [("tiff-vips.tiff", ".tif", ""), ("webp-vips.webp", ".webp", "[Q=50]"),
                                  ("heif-vips.heic", ".heic", "[compression=hevc]"), ("avif-vips.avif", ".avif", "")]:
        data = vips_image(suffix, options)
        if data is not None and len(data) <= HEAD:
            m[name] = data
    return m


def frame(kind, flags, stream, payload=b""):
    """An HTTP/2 frame: DATA 0, HEADERS 1, RST_STREAM 3, SETTINGS 4, PING 6, GOAWAY 7,
    WINDOW_UPDATE 8, CONTINUATION 9."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack(fields):
    """A header block of literal fields without indexing, no Huffman coding (RFC 7541 6.2.2)."""
    def integer(value):
        if value < 127:
            return bytes([value])
        out, value = [127], value - 127
        while value >= 128:
            out.append(value % 128 + 128)
            value //= 128
        return bytes(out + [value])
    block = b""
    for name, value in fields:
        block += b"\x00" + integer(len(name)) + name.encode() + integer(len(value)) + value.encode()
    return block


def h2():
    """Inputs of the h2 target: the first byte picks the side (even: server, fed a client's bytes after
    the preface; odd: client, fed a server's), the second the read size (0: one read)."""
    END_STREAM, END_HEADERS, PADDED = 0x1, 0x4, 0x8
    settings = frame(4, 0, 0, struct.pack(">HI", 3, 100) + struct.pack(">HI", 4, 65535))
    ack = frame(4, 1, 0)

    def request(stream, path="/3/device/ab", body=b"{}", extra=()):
        fields = [(":method", "POST"), (":scheme", "https"), (":authority", "relay.test"), (":path", path),
                  ("apns-topic", "com.example.app"), ("content-length", str(len(body)))] + list(extra)
        return frame(1, END_HEADERS, stream, hpack(fields)) + frame(0, END_STREAM, stream, body)

    def answer(stream, status="200", body=b""):
        fields = [(":status", status), ("apns-id", "5E6B5C8A-0000-0000-0000-000000000000")]
        if not body:
            return frame(1, END_HEADERS | END_STREAM, stream, hpack(fields))
        return frame(1, END_HEADERS, stream, hpack(fields + [("content-length", str(len(body)))])) + \
            frame(0, END_STREAM, stream, body)

    block = hpack([(":method", "POST"), (":scheme", "https"), (":authority", "relay.test"), (":path", "/3/device/cd")])
    seeds = {
        "server-one-request": bytes([0, 0]) + settings + request(1),
        "server-three-requests-small-reads": bytes([0, 7]) + settings + request(1) + request(3) + request(5, body=b"x" * 300),
        "server-body-too-large": bytes([0, 0]) + settings + request(1, body=b"y" * 600),
        "server-continuation": bytes([0, 0]) + settings + frame(1, 0, 1, block[:20]) + frame(9, END_HEADERS, 1, block[20:]) + frame(0, END_STREAM, 1, b"{}"),
        "server-padded-data": bytes([0, 0]) + settings + frame(1, END_HEADERS, 1, block) + frame(0, END_STREAM | PADDED, 1, b"\x04{}\x00\x00\x00\x00"),
        "server-reset-before-end": bytes([0, 0]) + settings + frame(1, END_HEADERS, 1, block) + frame(3, 0, 1, struct.pack(">I", 8)),
        "server-ping-window-goaway": bytes([0, 0]) + settings + frame(6, 0, 0, b"12345678") + frame(8, 0, 0, struct.pack(">I", 1000)) + request(1) + frame(7, 0, 0, struct.pack(">II", 1, 0)),
        "server-trailers": bytes([0, 0]) + settings + frame(1, END_HEADERS, 1, block) + frame(0, 0, 1, b"{}") + frame(1, END_HEADERS | END_STREAM, 1, hpack([("x-trailer", "1")])),
        "client-three-answers": bytes([1, 0]) + settings + ack + answer(1) + answer(3, "410", b'{"reason":"Unregistered"}') + answer(5),
        "client-interim-then-final": bytes([1, 0]) + settings + frame(1, END_HEADERS, 1, hpack([(":status", "100")])) + answer(1),
        "client-goaway-refuses": bytes([1, 0]) + settings + answer(1) + frame(7, 0, 0, struct.pack(">II", 1, 0)),
        "client-refused-stream": bytes([1, 5]) + settings + frame(3, 0, 3, struct.pack(">I", 7)) + answer(1) + answer(5),
        "client-one-stream-at-a-time": bytes([1, 0]) + frame(4, 0, 0, struct.pack(">HI", 3, 1)) + answer(1) + answer(3) + answer(5),
        "client-large-answer": bytes([1, 0]) + settings + answer(1, "400", b"z" * 700),
    }
    return seeds


def main():
    for name, data in h2().items():
        write(H2, name, data)
    for name, data in payloads().items():
        write(PAYLOAD, name, data)
    for name, data in media().items():
        assert len(data) <= HEAD, name
        write(MEDIA, name, data)


if __name__ == "__main__":
    main()
