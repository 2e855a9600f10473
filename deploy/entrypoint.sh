#!/bin/sh
# The appliance's entrypoint: runs render (or, with --exec PROGRAM ARGS..., PROGRAM) as the owner
# of the folder the service writes, whatever uid that is, so ./out stays its user's.
#
# Started as root (compose.yaml, with every capability dropped but SETUID and SETGID), it takes on
# the owner and group of RENDER_OWNER_OF (default /data/out; the classroom page's /data/jobs) and
# execs as them: no root process is left. A folder owned by root (Docker makes a missing ./out as
# root) is refused with the command that fixes it. Started as any other user (RENDER_UID, docker
# run --user, the image's 10001) it runs as that user.
set -eu
if [ "${1:-}" = "--exec" ]; then
    shift
else
    set -- /opt/render/venv/bin/python -m render "$@"
fi
if [ "$(id -u)" != 0 ]; then
    exec "$@"
fi
folder="${RENDER_OWNER_OF:-/data/out}"
owner="$(stat -c %u "$folder")"
group="$(stat -c %g "$folder")"
if [ "$owner" = 0 ]; then
    host=./out
    [ "$folder" = /data/jobs ] && host=./jobs
    echo "render: error: $host belongs to root and render does not run as root: on the host run" \
         "sudo chown -R \"\$(id -u):\$(id -g)\" $host (Docker makes a missing $host as root)," \
         "or set RENDER_UID and RENDER_GID" >&2
    exit 2
fi
exec setpriv --reuid="$owner" --regid="$group" --clear-groups -- "$@"
