# Sourced by the scripts that run Python tools from PyPI.
#   ensure_venv DIR REQUIREMENTS
# makes DIR a venv (python3 -m venv) with the pinned REQUIREMENTS installed (pip install -r), and
# remakes it from scratch when that file's SHA-256 differs from the one recorded at the last
# install (DIR/requirements.sha256) or DIR/bin/python is missing.
ensure_venv() {
  local dir=$1 requirements=$2 want
  want=$(sha256sum "$requirements" | cut -c1-64)
  if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/requirements.sha256" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo "$(basename "$0" .sh): installing $requirements into $dir" >&2
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  echo "$want" >"$dir/requirements.sha256"
}
