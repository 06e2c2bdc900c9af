#!/usr/bin/env bash
# Regenerates samples/: synthetic media files (samples/media/) and APNs push
# payloads (samples/*.json) used to exercise PushMedia.
#
# Everything is synthetic (ffmpeg lavfi sources, fixed noise seeds,
# single-threaded encoders); no network access is needed.
#
# Requires (Debian/Ubuntu packages):
#   ffmpeg                  (with libx264, libvpx, libmp3lame; Debian's build has them)
#   libvips-tools           (vips, vipsheader; libheif1 with x265 + aom for HEIC/AVIF)
#   libimage-exiftool-perl  (exiftool, to set EXIF Orientation)
#   python3                 (standard library only, writes the JSON payloads)
#   file                    (optional, only for the summary at the end)
#
# Usage: scripts/make-samples.sh        (from anywhere; writes <repo>/samples)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/samples"
MEDIA="$OUT/media"

for tool in ffmpeg vips vipsheader exiftool python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: '$tool' not found (see header of $0)" >&2; exit 1; }
done

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

rm -rf "$MEDIA"
mkdir -p "$MEDIA"

# ffmpeg with deterministic settings: no metadata/version strings, one thread.
ff() {
  ffmpeg -nostdin -hide_banner -loglevel error -y -threads 1 -filter_threads 1 "$@"
}

# scene W H SEED SUNX SUNY PALETTE OUT.png
# Renders a photo-like landscape (graded sky, sun with glow, rolling hills,
# a few buildings with lit windows, textured ground) plus mild seeded noise.
# PALETTE: 0 = sunset (warm), 1 = daylight (blue), 2 = dusk (violet).
scene() {
  local w=$1 h=$2 seed=$3 sx=$4 sy=$5 pal=$6 out=$7
  local sky_r sky_g sky_b
  case $pal in
    0) sky_r='40+215*v'  sky_g='60+120*v'  sky_b='150-70*v' ;;
    1) sky_r='70+120*v'  sky_g='130+90*v'  sky_b='230-20*v' ;;
    *) sky_r='60+150*v'  sky_g='40+80*v'   sky_b='120+40*v' ;;
  esac
  # Shared sub-expressions, stored in geq registers:
  #   0: u (0..1 across)   1: v (0..1 down)   2: horizon height at u
  #   3: distance to sun (in units of image width)
  #   4: 1 if inside a building, 5: 1 if on a lit window
  local pre="st(0,X/W);st(1,Y/H);\
st(2,0.62+0.045*sin(ld(0)*6.3+1.0)+0.018*sin(ld(0)*23.0));\
st(3,hypot(ld(0)-$sx,(ld(1)-$sy)*H/W));\
st(4,gt(ld(1),0.50+0.10*gt(mod(floor(ld(0)*9),3),0))*lt(ld(1),ld(2)+0.01)*between(ld(0),0.08,0.46)*lt(mod(ld(0)*9,1),0.8));\
st(5,ld(4)*lt(mod(X,W/70),W/140)*lt(mod(Y,H/45),H/90)*gt(sin(floor(X/(W/70))*12.9898+floor(Y/(H/45))*78.233),0.1))"
  local sun="255*lt(ld(3),0.045)+110*exp(-ld(3)*9)"
  local tex="10*sin(X/7.0)*sin(Y/5.0)+8*sin((X+2*Y)/23.0)"
  # channel CR_SKY CR_GROUND CR_BUILDING CR_WINDOW
  ch() {
    echo "$pre;\
if(ld(5),$4,if(ld(4),$3,if(gt(ld(1),ld(2)),$2+$tex,clip(($1)+$sun,0,255))))"
  }
  local rx gx bx
  rx=$(ch "${sky_r//v/ld(1)}" "30+70*(1-ld(1))" "28+12*ld(0)" "250")
  gx=$(ch "${sky_g//v/ld(1)}" "60+90*(1-ld(1))" "26+10*ld(0)" "215")
  bx=$(ch "${sky_b//v/ld(1)}" "25+30*(1-ld(1))" "36+10*ld(0)" "130")
  ff -f lavfi -i "color=c=black:s=${w}x${h}:d=1,format=rgb24,geq=r='$rx':g='$gx':b='$bx',format=gbrp,noise=alls=7:allf=u:all_seed=$seed,format=rgb24" \
     -frames:v 1 "$out"
}

echo "== images"

# 1. Large phone photo: scene composed upright as portrait 3024x4032, stored
#    rotated 90 degrees counter-clockwise (landscape 4032x3024) with EXIF
#    Orientation 6 ("rotate 90 CW to display"), like a phone held upright.
scene 3024 4032 101 0.62 0.30 0 "$TMP/photo-upright.png"
vips rot "$TMP/photo-upright.png" "$TMP/photo-stored.v" d270
vips jpegsave "$TMP/photo-stored.v" "$MEDIA/photo-exif.jpg" --Q 80 --strip
exiftool -q -overwrite_original -n \
  -Orientation=6 -Make=PushMedia -Model="Sample Camera" \
  -DateTimeOriginal="2024:04:12 18:42:07" "$MEDIA/photo-exif.jpg"

# 2. Logo with a real alpha channel: transparent background, soft drop
#    shadow (partial alpha), opaque badge with a ring and a plus sign.
lx="st(0,hypot(X-390,Y-290));st(1,hypot(X-410,Y-315));st(2,gt(between(X,300,480)*between(Y,270,310)+between(X,370,410)*between(Y,200,380),0))"
ff -f lavfi -i "color=c=black:s=800x600:d=1,format=rgba,geq=\
r='$lx;if(lt(ld(0),220),if(ld(2)+between(ld(0),170,190),255,230-ld(0)/4),0)':\
g='$lx;if(lt(ld(0),220),if(ld(2)+between(ld(0),170,190),255,70+ld(0)/5),0)':\
b='$lx;if(lt(ld(0),220),if(ld(2)+between(ld(0),170,190),255,90),0)':\
a='$lx;if(lt(ld(0),220),255,if(lt(ld(1),245),clip(140-(ld(1)-200)*3,0,140),0))'" \
   -frames:v 1 "$TMP/logo.png"
vips pngsave "$TMP/logo.png" "$MEDIA/logo-alpha.png" --compression 9 --strip

# 3. Banner (WebP, opaque).
scene 1200 800 103 0.80 0.25 1 "$TMP/banner.png"
vips webpsave "$TMP/banner.png" "$MEDIA/banner.webp" --Q 75 --strip

# 4. HEIC (HEVC-coded HEIF) and 5. AVIF (AV1-coded HEIF).
scene 1000 750 104 0.30 0.35 2 "$TMP/portrait.png"
vips heifsave "$TMP/portrait.png" "$MEDIA/portrait.heic" --Q 60 --compression hevc --strip
scene 1000 750 105 0.50 0.50 0 "$TMP/sunset.png"
vips heifsave "$TMP/sunset.png" "$MEDIA/sunset.avif" --Q 60 --compression av1 --strip

# 6. Animated GIF: 12-frame spinner, 200x200, loops forever.
sp="st(0,hypot(X-100,Y-100));st(1,mod(floor((atan2(Y-100,X-100)+PI)/(2*PI)*12)-N+24,12));st(2,between(ld(0),55,85))"
ff -f lavfi -i "color=c=white:s=200x200:r=12:d=1,format=rgb24,geq=\
r='$sp;if(ld(2),40+16*ld(1),255)':\
g='$sp;if(ld(2),110+12*ld(1),255)':\
b='$sp;if(ld(2),220+2*ld(1),255)',\
split[a][b];[a]palettegen=max_colors=32:stats_mode=full[p];[b][p]paletteuse=dither=none" \
   -loop 0 "$MEDIA/spinner.gif"

# 7. "Scanned document" TIFF: off-white page, ragged text lines, a stamp.
ff -f lavfi -i "color=c=black:s=800x600:d=1,format=gray,geq=\
lum='st(0,floor((Y-60)/22));st(1,70+40*mod(ld(0)*7,5));\
if(between(Y,60,560)*lt(mod(Y-60,22),9)*between(X,60,740-ld(1))*gt(sin(X/6.0+ld(0)),-0.7),60,\
if(lt(hypot(X-640,Y-110),45)*gt(hypot(X-640,Y-110),38),120,236+8*sin(X/97.0+Y/61.0)))',\
format=gray,noise=alls=4:allf=u:all_seed=107,format=rgb24" -frames:v 1 "$TMP/scan.png"
vips tiffsave "$TMP/scan.png" "$MEDIA/scan.tiff" --compression deflate --predictor horizontal --strip

# 8. BMP diagram: three boxes joined by arrows, flat colours (24-bit BMP).
ff -f lavfi -i "color=c=white:s=640x480:d=1,format=rgb24,geq=\
r='st(0,between(Y,190,290));st(1,ld(0)*(between(X,40,200)+between(X,440,600)));st(2,between(X,240,400)*between(Y,60,180));st(3,between(Y,236,244)*(between(X,200,440)));st(4,between(X,316,324)*between(Y,180,240));if(ld(1),60,if(ld(2),250,if(ld(3)+ld(4),40,255)))':\
g='st(0,between(Y,190,290));st(1,ld(0)*(between(X,40,200)+between(X,440,600)));st(2,between(X,240,400)*between(Y,60,180));st(3,between(Y,236,244)*(between(X,200,440)));st(4,between(X,316,324)*between(Y,180,240));if(ld(1),140,if(ld(2),180,if(ld(3)+ld(4),40,255)))':\
b='st(0,between(Y,190,290));st(1,ld(0)*(between(X,40,200)+between(X,440,600)));st(2,between(X,240,400)*between(Y,60,180));st(3,between(Y,236,244)*(between(X,200,440)));st(4,between(X,316,324)*between(Y,180,240));if(ld(1),220,if(ld(2),60,if(ld(3)+ld(4),40,255)))'" \
   -frames:v 1 -pix_fmt bgr24 "$MEDIA/diagram.bmp"

# 9. JPEG whose file name has no extension.
scene 640 480 109 0.25 0.30 1 "$TMP/noext.png"
vips jpegsave "$TMP/noext.png" "$TMP/noext.jpg" --Q 82 --strip
mv "$TMP/noext.jpg" "$MEDIA/no-extension"

# 10. Opaque RGB PNG named .jpg.
scene 640 480 110 0.70 0.40 2 "$TMP/fake.png"
vips pngsave "$TMP/fake.png" "$TMP/fake-out.png" --compression 9 --strip
mv "$TMP/fake-out.png" "$MEDIA/really-a-png.jpg"

# 11. Baseline JPEG cut to 40% of its bytes: valid header, truncated scan data.
scene 1600 1200 111 0.40 0.30 0 "$TMP/trunc.png"
vips jpegsave "$TMP/trunc.png" "$TMP/full.jpg" --Q 85 --strip
full_size=$(stat -c %s "$TMP/full.jpg")
head -c $(( full_size * 40 / 100 )) "$TMP/full.jpg" > "$MEDIA/truncated.jpg"

echo "== audio"

# Two-partial chime with exponential decay.
chime='0.5*sin(2*PI*880*t)*exp(-3*t)+0.25*sin(2*PI*1318.5*t)*exp(-4*t)'
ff -f lavfi -i "aevalsrc=exprs='$chime':s=44100:d=2" \
   -ac 1 -c:a libmp3lame -b:a 64k -id3v2_version 0 -write_xing 0 -fflags +bitexact "$MEDIA/chime.mp3"
ping='0.6*sin(2*PI*1568*t)*exp(-6*t)'
ff -f lavfi -i "aevalsrc=exprs='$ping':s=44100:d=2" \
   -ac 1 -c:a aac -b:a 64k -fflags +bitexact -flags:a +bitexact "$MEDIA/ping.m4a"
bell='0.5*sin(2*PI*660*t)*exp(-4*t)+0.2*sin(2*PI*1650*t)*exp(-7*t)'
ff -f lavfi -i "aevalsrc=exprs='$bell':s=22050:d=1" \
   -ac 1 -c:a pcm_s16le -fflags +bitexact "$MEDIA/bell.wav"

echo "== video"

# 2 s, 320x240, 15 fps: a ball crossing a gradient.
vid="color=c=black:s=320x240:r=15:d=2,format=rgb24,geq=\
r='st(0,lt(hypot(X-(40+120*T),Y-120+40*sin(3*T)),28));if(ld(0),250,40+150*Y/H)':\
g='st(0,lt(hypot(X-(40+120*T),Y-120+40*sin(3*T)),28));if(ld(0),200,70+80*Y/H)':\
b='st(0,lt(hypot(X-(40+120*T),Y-120+40*sin(3*T)),28));if(ld(0),60,170-60*Y/H)'"
ff -f lavfi -i "$vid" -c:v libx264 -profile:v main -preset medium -crf 28 -pix_fmt yuv420p \
   -movflags +faststart -fflags +bitexact -flags:v +bitexact "$MEDIA/clip.mp4"
ff -f lavfi -i "$vid" -c:v libvpx-vp9 -b:v 0 -crf 40 -deadline good -cpu-used 4 -pix_fmt yuv420p \
   -fflags +bitexact -flags:v +bitexact "$MEDIA/clip.webm"

echo "== payloads"

python3 - "$OUT" <<'PY'
import json, os, sys

out = sys.argv[1]


def aps(title, body, sound=None):
    a = {"alert": {"title": title, "body": body}, "mutable-content": 1}
    if sound:
        a["sound"] = sound
    return a


def write(name, payload):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, ensure_ascii=False)
        f.write("\n")


def compact_len(payload):
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


write("01-photo-exif.json", {
    "aps": aps("Spring deals are live", "Fresh picks for your garden, up to 40% off this weekend.", "default"),
    "media_url": "media/photo-exif.jpg",
    "deep_link": "shop://deals/42",
    "campaign": {"id": "spring-24", "variant": "b"},
})
write("02-logo-alpha.json", {
    "aps": aps("Welcome to Acme Rewards", "You earned 200 points just for joining. Tap to see your perks."),
    "image_url": "media/logo-alpha.png",
})
write("03-webp.json", {
    "aps": aps("New arrivals", "The summer collection just dropped. Be the first to shop it."),
    "imageUrl": "media/banner.webp",
})
write("04-heic.json", {
    "aps": aps("Your photo is ready", "Anna shared a new portrait with you.", "default"),
    "media_url": "media/portrait.heic",
})
write("05-avif.json", {
    "aps": aps("Weekend getaway", "Sunset cabins from $89 a night. Only 3 left for Saturday."),
    "mediaUrl": "media/sunset.avif",
})
write("06-animated-gif.json", {
    "aps": aps("Your order is on its way", "Driver is 5 minutes away. Track it live."),
    "media_url": "media/spinner.gif",
})
write("07-tiff.json", {
    "aps": aps("Document scanned", "Invoice #8812 was scanned and is ready to review."),
    "attachment-url": "media/scan.tiff",
})
write("08-bmp.json", {
    "aps": aps("Workflow updated", "The approval flow now has a new review step."),
    "media_url": "media/diagram.bmp",
})
write("09-no-extension.json", {
    "aps": aps("Daily view", "Clear skies over the bay today. Enjoy the sunshine!"),
    "media_url": "media/no-extension",
})
write("10-png-named-jpg.json", {
    "aps": aps("Evening edition", "Tonight's top stories, picked for you."),
    "media_url": "media/really-a-png.jpg",
})
write("11-truncated.json", {
    "aps": aps("Flash sale", "Everything in outdoor gear is 30% off until midnight."),
    "media_url": "media/truncated.jpg",
})
write("12-mp3.json", {
    "aps": aps("New voice message", "Tap to listen to Sam's 2-second message.", "default"),
    "media_url": "media/chime.mp3",
})
write("13-m4a.json", {
    "aps": aps("Podcast teaser", "Episode 12 is out: hear a quick preview."),
    "media_url": "media/ping.m4a",
})
write("14-wav.json", {
    "aps": aps("Doorbell", "Someone is at the front door."),
    "media_url": "media/bell.wav",
})
write("15-mp4.json", {
    "aps": aps("Watch the highlight", "Replay the winning goal from last night's match."),
    "media_url": "media/clip.mp4",
})
write("16-webm.json", {
    "aps": aps("Product demo", "See the new blender in action in 2 seconds."),
    "media_url": "media/clip.webm",
})
write("17-no-media.json", {
    "aps": aps("Password changed", "Your password was changed. If this wasn't you, contact support.", "default"),
    "deep_link": "app://security",
})
write("18-no-alert.json", {
    "aps": {"content-available": 1},
    "media_url": "media/banner.webp",
    "sync": "catalog",
})

# 19: compact UTF-8 serialization between 3950 and 4000 bytes.
body = ("Été en fête : crème brûlée, café glacé et pâtisseries à -30 % ce week-end seulement. "
        "Réservez votre table dès maintenant : places limitées, première arrivée, première servie.")
near = {
    "aps": aps("Dernière chance : soldes d'été 🎉", body, "default"),
    "media_url": "media/photo-exif.jpg",
    "deep_link": "shop://campaigns/summer-fr?utm_source=push&utm_medium=nse&utm_campaign=ete-24",
    "campaign": {"id": "ete-24", "variant": "a", "locale": "fr-FR"},
    "items": [
        {"sku": f"FR-{i:04d}", "name": f"Pâtisserie n°{i}", "price": f"{3 + i % 7},{i % 10}0 €"}
        for i in range(1, 31)
    ],
    "tracking": "",
}
target = 3975
filler = "abcdefghijklmnopqrstuvwxyz0123456789"
while compact_len(near) < target:
    near["tracking"] += filler[len(near["tracking"]) % len(filler)]
n = compact_len(near)
assert 3950 <= n <= 4000, n
write("19-near-limit.json", near)

with open(os.path.join(out, "20-invalid.json"), "w", encoding="utf-8") as f:
    f.write("""{
  "aps": {
    "alert": {
      "title": "Last call: free shipping",
      "body": "Order in the next 2 hours and shipping is on us.",
    },
    "mutable-content": 1
  },
  "media_url": "media/banner.webp"
""")

write("21-escape-attempt.json", {
    "aps": aps("Account notice", "Please review the attached statement."),
    "media_url": "../../etc/passwd",
})

print(f"19-near-limit.json compact length: {n} bytes")
PY
python3 "$(dirname "$0")/vendor-samples.py" "$OUT"

echo "== summary"
(
  cd "$OUT"
  if command -v file >/dev/null 2>&1; then
    file --mime-type media/*
  fi
  vipsheader -f orientation media/photo-exif.jpg | sed 's/^/photo-exif.jpg orientation: /'
  du -sh .
)
