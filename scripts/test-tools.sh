#!/usr/bin/env bash
# What the scripts of `make test` install for themselves, made ahead: scripts/test.sh runs this
# in the background beside the first build, so that a run from nothing does not wait for PyPI
# and debootstrap between its scripts. The Python tools' venvs (pinned, from PyPI) and, with
# podman, the Debian base image and, until the image's `media` stage is built here, the stage of
# Debian's libraries the image test then builds on. Each script still ensures what it needs
# itself (a no-op once this has run), so a script run alone needs nothing from here.
#   scripts/test-tools.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh

ensure_venv .build/tools/schemathesis scripts/schemathesis-requirements.txt
ensure_venv .build/tools/apns Tests/apns/requirements.txt
ensure_venv .build/tools/fcm Tests/fcm/requirements.txt
ensure_venv .build/tools/mediaurl Tests/mediaurl/requirements.txt
ensure_venv .build/tools/tracing Tests/tracing/requirements.txt
ensure_venv .build/tools/fleet Tests/fleet/requirements.txt
scripts/image.sh --prepare
