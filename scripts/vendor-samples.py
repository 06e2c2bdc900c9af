#!/usr/bin/env python3
"""Writes the vendor-shaped sample payloads (samples/22-*.json …): one per push vendor's
convention, each pointing at media in samples/media/. Called by make-samples.sh; safe to run
on its own (it only writes JSON)."""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "samples")


def write(name, payload):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=2, ensure_ascii=False)
        f.write("\n")


def alert(title, body):
    return {"alert": {"title": title, "body": body}}


# Firebase Cloud Messaging HTTP v1: one image for iOS and Android; each part gets its variant.
write("22-fcm-message.json", {
    "message": {
        "token": "device-token-123",
        "notification": {"title": "Flash sale", "body": "Sneakers at half price until midnight.",
                         "image": "media/banner.webp"},
        "apns": {"payload": {"aps": {"sound": "default"}}},
        "android": {"priority": "high", "notification": {"channel_id": "deals"}},
        "data": {"deep_link": "shop://sale/7"},
    }
})

# FCM with a Web Push part: 2:1 image and a 192 px icon.
write("23-fcm-webpush.json", {
    "message": {
        "topic": "news",
        "notification": {"title": "Your garden this week", "body": "Five plants that love shade."},
        "webpush": {"notification": {"image": "media/photo-exif.jpg"}, "fcm_options": {"link": "https://shop.example/garden"}},
    }
})

# An APNs payload sent through FCM's iOS SDK: fcm_options.image.
write("24-fcm-apns.json", {
    "aps": dict(alert("Back in stock", "The linen shirt is back in your size."), **{"mutable-content": 1}),
    "fcm_options": {"image": "media/portrait.heic"},
    "gcm.message_id": "1234567890",
})

# OneSignal: several attachments under att (id → URL).
write("25-onesignal.json", {
    "aps": dict(alert("New arrivals", "Two looks picked for you."), **{"mutable-content": 1}),
    "att": {"id1": "media/sunset.avif", "id2": "media/logo-alpha.png"},
    "custom": {"i": "a5f4c1e2-notification-id", "u": "shop://new"},
})

# Airship: media_attachment with options kept as given (crop, hidden) and thumbnail_id.
write("26-airship.json", {
    "aps": dict(alert("Weekend trip?", "Fares to the coast from 19 €."), **{"mutable-content": 1}),
    "com.urbanairship.media_attachment": {
        "url": ["media/photo-exif.jpg"],
        "thumbnail_id": "hero",
        "options": {"crop": {"x": 0.1, "y": 0.0, "width": 0.8, "height": 1.0}, "hidden": False},
        "content": {"title": "Weekend trip?", "subtitle": "Coast fares", "body": "Fares to the coast from 19 €."},
    },
})

# Braze: ab.att with a type that does not match the bytes (filled from the real type).
write("27-braze.json", {
    "aps": dict(alert("Your receipt", "Thanks for your order #5521."), **{"mutable-content": 1}),
    "ab": {"att": {"url": "media/no-extension", "type": "png"}, "c": "campaign-5521"},
})

# CleverTap: ct_mediaUrl with ct_mediaType (filled from the sniffed bytes).
write("28-clevertap.json", {
    "aps": dict(alert("It's live", "Watch the launch now."), **{"mutable-content": 1}),
    "ct_mediaUrl": "media/spinner.gif",
    "ct_mediaType": "image",
    "wzrk_id": "1700000000_20261122",
})

# Iterable: itbl.attachment-url.
write("29-iterable.json", {
    "aps": dict(alert("Reminder", "Your appointment is tomorrow at 10:00."), **{"mutable-content": 1}),
    "itbl": {"attachment-url": "media/scan.tiff", "templateId": 9931, "messageId": "m-77"},
})

# Customer.io: CIO.push.image.
write("30-customerio.json", {
    "aps": alert("We miss you", "Here is 10% off your next order."),
    "CIO": {"push": {"image": "media/diagram.bmp", "link": "shop://coupon"}},
})

# CleverTap Push Templates: an auto carousel as an FCM HTTP v1 data message (every value a
# string), five images of five shapes and formats, made 3:2 within 86 KB each, together under
# Android's 5,000,000 decoded bytes (docs/templates.md).
write("31-clevertap-carousel.json", {
    "message": {
        "token": "device-token-456",
        "data": {
            "pt_id": "pt_carousel", "pt_title": "New season", "pt_msg": "Five looks for spring",
            "pt_dl1": "shop://looks", "pt_img1": "media/photo-exif.jpg", "pt_img2": "media/banner.webp",
            "pt_img3": "media/sunset.avif", "pt_img4": "media/portrait.heic", "pt_img5": "media/scan.tiff",
            "pt_img1_alt_text": "Look one", "wzrk_pn": "true",
        },
    },
})

# Braze push story (Android data map): pages ab_c0… with their titles and deep links, made 2:1.
write("32-braze-story.json", {
    "ab_c": "1", "t": "Our story", "a": "Swipe through the collection",
    "ab_c0_i": "media/photo-exif.jpg", "ab_c0_t": "Morning", "ab_c0_uri": "shop://morning",
    "ab_c1_i": "media/banner.webp", "ab_c1_t": "Noon", "ab_c1_uri": "shop://noon",
    "ab_c2_i": "media/sunset.avif", "ab_c2_t": "Evening", "ab_c2_uri": "shop://evening",
})
