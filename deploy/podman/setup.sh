#!/usr/bin/env bash
# Set podman up as a Docker-compatible API on this machine, with no registry:
#
#   1. apt-get install podman runc bubblewrap (+ python3, python3-pytest and the
#      other host packages the image is made of) when missing;
#   2. write /etc/containers/containers.conf: runc, cgroupfs, file events, and
#      default ulimits no higher than this shell's hard limits (podman's own
#      defaults ask for more than a process without CAP_SYS_RESOURCE may set,
#      and every container then fails with "error setting rlimit type 7/6");
#   3. start `podman system service --time=0 unix:///run/podman/podman.sock`
#      in the background (pid file, idempotent);
#   4. build the image localhost/membench-python:latest WITHOUT pulling:
#      build_rootfs.py tars up the host's own Debian python3 + pytest (and a
#      small shell toolset) with their dependency closure and `podman import`s it;
#      rebuilt only when the host packages or the builder change;
#   5. run one container through the socket to prove it works.
#
# Prints DOCKER_HOST=unix:///run/podman/podman.sock on stdout at the end.
# Env: MEMBENCH_IMAGE (localhost/membench-python:latest),
#      MEMBENCH_IMAGE_PACKAGES (space-separated Debian packages for the image),
#      PODMAN_STORAGE_DRIVER (vfs to force vfs; default: podman's, i.e. overlay,
#      with a fall back to vfs when overlay does not work here),
#      PODMAN_SOCKET (/run/podman/podman.sock).
# Log: deploy/podman/.work/service.log; pid: /run/podman/membench-service.pid
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$HERE/.work"
SOCK="${PODMAN_SOCKET:-/run/podman/podman.sock}"
PIDFILE="$(dirname "$SOCK")/membench-service.pid"
LOGFILE="$WORK/service.log"
IMAGE="${MEMBENCH_IMAGE:-localhost/membench-python:latest}"
CONF=/etc/containers/containers.conf
MARK="# membench: written by deploy/podman/setup.sh"
DEFAULT_PACKAGES="python3 python3-pytest bash dash coreutils grep sed findutils diffutils tar gzip base-files"
IMAGE_PACKAGES="${MEMBENCH_IMAGE_PACKAGES:-$DEFAULT_PACKAGES}"

log() { printf '[podman-setup] %s\n' "$*" >&2; }
die() { printf '[podman-setup] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (rootful podman, /run/podman socket)"
mkdir -p "$WORK" "$(dirname "$SOCK")"
exec 9>"$WORK/.setup.lock"
flock 9

# ---- 1. packages ----------------------------------------------------------
missing=()
for pkg in podman runc bubblewrap curl $IMAGE_PACKAGES; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    [ "$status" = "install ok installed" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} with apt-get"
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 \
        || die "apt-get install ${missing[*]} failed"
fi

# ---- 2. containers.conf ---------------------------------------------------
nofile="$(ulimit -Hn)"
[ "$nofile" = unlimited ] && nofile=1048576
[ "$nofile" -gt 1048576 ] && nofile=1048576
nproc="$(ulimit -Hu)"
pid_max="$(cat /proc/sys/kernel/pid_max)"
# podman caps its own (and so conmon's and runc's) process limit at pid_max,
# and a container may not ask for more than that
[ "$nproc" = unlimited ] && nproc="$pid_max"
[ "$nproc" -gt "$pid_max" ] && nproc="$pid_max"

new_conf="$(cat <<EOF
$MARK
# Podman's defaults fail on this kind of machine (no systemd; no
# CAP_SYS_RESOURCE to raise rlimits): use runc with the cgroupfs manager, file
# events and ulimits at or below the current hard limits.
[containers]
default_ulimits = [
  "nofile=$nofile:$nofile",
  "nproc=$nproc:$nproc",
]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
)"
conf_changed=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$new_conf" ]; then
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        cp -n "$CONF" "$CONF.before-membench"
        log "kept the previous $CONF as $CONF.before-membench"
    fi
    mkdir -p "$(dirname "$CONF")"
    printf '%s\n' "$new_conf" >"$CONF"
    conf_changed=1
    log "wrote $CONF (nofile=$nofile nproc=$nproc)"
fi

# ---- storage driver -------------------------------------------------------
STORAGE_CONF=/etc/containers/storage.conf
write_vfs_storage() {
    cat >"$STORAGE_CONF" <<EOF
$MARK
[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
EOF
    conf_changed=1
}
if [ "${PODMAN_STORAGE_DRIVER:-}" = vfs ] && ! grep -q 'driver = "vfs"' "$STORAGE_CONF" 2>/dev/null; then
    log "PODMAN_STORAGE_DRIVER=vfs: switching storage to vfs (resets podman storage)"
    podman system reset -f >&2 2>/dev/null || true
    write_vfs_storage
fi
if ! podman info >/dev/null 2>"$WORK/podman-info.err"; then
    if grep -qi overlay "$WORK/podman-info.err" && ! grep -q 'driver = "vfs"' "$STORAGE_CONF" 2>/dev/null; then
        log "overlay storage does not work here; falling back to vfs"
        cat "$WORK/podman-info.err" >&2
        podman system reset -f >&2 2>/dev/null || true
        write_vfs_storage
        podman info >/dev/null 2>"$WORK/podman-info.err" || { cat "$WORK/podman-info.err" >&2; die "podman info fails"; }
    else
        cat "$WORK/podman-info.err" >&2
        die "podman info fails"
    fi
fi

# ---- 3. API service -------------------------------------------------------
ping_ok() { [ "$(curl -s --max-time 5 --unix-socket "$SOCK" http://d/_ping 2>/dev/null)" = OK ]; }
service_pid() {
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid="$(cat "$PIDFILE")"
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'system service' || return 1
    echo "$pid"
}
stop_service() {
    local pid
    pid="$(service_pid)" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
}

if [ "$conf_changed" = 1 ] && service_pid >/dev/null; then
    log "configuration changed: restarting the podman service"
    stop_service
fi
if pid="$(service_pid)" && ping_ok; then
    log "podman service already running (pid $pid)"
elif ! service_pid >/dev/null && ping_ok; then
    log "a podman API service not started by this script already answers on $SOCK; using it"
else
    stop_service
    rm -f "$SOCK"
    # conmon, the service's child, writes an `oom` marker into its working directory when a
    # container is OOM-killed: keep that out of whatever directory this script was started from
    cd "$WORK"
    nohup setsid podman system service --time=0 "unix://$SOCK" >>"$LOGFILE" 2>&1 </dev/null 9>&- &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 120); do
        ping_ok && break
        kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -n 30 "$LOGFILE" >&2; die "podman service exited (log: $LOGFILE)"; }
        sleep 0.25
    done
    ping_ok || { tail -n 30 "$LOGFILE" >&2; die "podman service does not answer on $SOCK (log: $LOGFILE)"; }
    log "podman service started (pid $(cat "$PIDFILE")) on unix://$SOCK, log $LOGFILE"
fi

# ---- 4. image (no pull) ---------------------------------------------------
SYS_PY=/usr/bin/python3   # the host's Debian python: only the stdlib is needed
# shellcheck disable=SC2086
want="$("$SYS_PY" "$HERE/build_rootfs.py" --hash-only $IMAGE_PACKAGES)"
have="$(podman image inspect --format '{{index .Labels "membench.rootfs"}}' "$IMAGE" 2>/dev/null || true)"
if [ "$want" = "$have" ]; then
    log "image $IMAGE is up to date"
else
    log "building $IMAGE from the host's packages ($IMAGE_PACKAGES)"
    t0=$SECONDS
    # shellcheck disable=SC2086
    "$SYS_PY" "$HERE/build_rootfs.py" "$WORK/rootfs.tar" $IMAGE_PACKAGES >/dev/null
    podman import --quiet \
        --change 'CMD ["python3"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
        --change "LABEL membench.rootfs=$want" \
        --message "membench sandbox image from host packages: $IMAGE_PACKAGES" \
        "$WORK/rootfs.tar" "$IMAGE" >/dev/null
    rm -f "$WORK/rootfs.tar"
    podman image prune -f >/dev/null 2>&1 || true   # the untagged previous build
    log "image $IMAGE built in $((SECONDS - t0))s"
fi

# ---- 5. smoke test through the Docker-compatible socket --------------------
out="$(curl -s --max-time 10 --unix-socket "$SOCK" http://d/v1.41/version | grep -o '"ApiVersion":"[^"]*"' | head -1 || true)"
[ -n "$out" ] || die "Docker API /version does not answer on $SOCK"
if ! smoke="$(podman --url "unix://$SOCK" run --rm --network none "$IMAGE" \
        python3 -c 'import pytest, sys; print("python", sys.version.split()[0], "pytest", pytest.__version__)' 2>&1)"; then
    printf '%s\n' "$smoke" >&2
    die "a container did not run through $SOCK"
fi
log "ok: $smoke in $IMAGE via unix://$SOCK ($out)"
echo "DOCKER_HOST=unix://$SOCK"
