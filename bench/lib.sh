# Helpers shared by the bench scripts (sourced). Expects BENCH, ROOT and OUT to be set.

log() { printf '\n== %s  [%s, load %s]\n' "$*" "$(date +%H:%M:%S)" "$(cut -d' ' -f1-3 /proc/loadavg)" >&2; }
die() { echo "${0##*/}: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # URL [tries]
  local i
  for ((i = 0; i < ${2:-200}; i++)); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  die "no answer from $1"
}
busy() { awk '/^cpu /{print ($2+$3+$4+$7+$8)/100}' /proc/stat; }  # all CPUs, seconds (USER_HZ 100)

# start_nginx DIR ROOT PORT: nginx-light, one worker, sendfile, no logs, serving ROOT on
# 127.0.0.1:PORT; prints its pid. Config and temp files under DIR.
start_nginx() {
  local dir=$1 root=$2 port=$3 nginx
  nginx=$(command -v nginx || echo /usr/sbin/nginx)
  rm -rf "$dir"; mkdir -p "$dir/tmp"
  cat > "$dir/nginx.conf" <<CONF
user root;
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  types { }
  default_type application/octet-stream;
  server { listen 127.0.0.1:$port; root $root; }
}
CONF
  "$nginx" -c "$dir/nginx.conf" -p "$dir" >/dev/null 2>>"$dir/error.log" &
  echo $!
}
