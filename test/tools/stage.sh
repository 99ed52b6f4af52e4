#!/usr/bin/env bash
# stage.sh NAME COMMAND [ARG...]: runs one stage of a make target and prints one line when it
# ends: the stage, how long it took, and the time since make started (ETCD_CONDUCTOR_MAKE_START,
# seconds since the epoch), so that whoever waits sees where the time goes.
set -u
name=$1
shift
start=$(date +%s)
echo "[make] ${name} ..."
"$@"
rc=$?
now=$(date +%s)
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
status=done
[ "$rc" -eq 0 ] || status="FAILED (exit $rc)"
printf '[make] %-20s %s in %s (total %s)\n' "$name" "$status" "$(mmss $((now - start)))" \
  "$(mmss $((now - ${ETCD_CONDUCTOR_MAKE_START:-$start})))"
exit "$rc"
