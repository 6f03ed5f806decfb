#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for qjoule's Slurm tests and for trying --slurm by hand.
#   scripts/slurm-local.sh start    # install slurm-wlm + munge if missing, configure, start, wait for idle
#   scripts/slurm-local.sh status   # sinfo, or why there is no cluster
#   scripts/slurm-local.sh stop     # stop slurmd, slurmctld and munged (configuration left in place)
# Needs root (it writes /etc/slurm/slurm.conf and runs the daemons as root). The node is this host with
# its CPUs and 90% of its memory, in one default partition "local". Logs: /var/log/slurm/.
# Exit status: 0 when the cluster is up (start/status), 1 with one line on stderr saying why not.
set -euo pipefail

say() { echo "slurm-local: $*" >&2; }
die() { say "$*"; exit 1; }

conf=/etc/slurm/slurm.conf
host=$(hostname -s)

install_if_missing() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then return; fi
  [ "$(id -u)" = 0 ] || die "slurm-wlm and munge are not installed and this is not root (apt-get needs root)"
  say "installing slurm-wlm and munge from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null ||
    die "apt-get install slurm-wlm munge failed (run apt-get update first?)"
}

write_conf() {
  local cpus mem_mb
  cpus=$(nproc)
  mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
  cat > "$conf" <<EOF
# Written by qjoule's scripts/slurm-local.sh: a one-node test cluster.
ClusterName=qjoule-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
# Start a batch job as soon as the node frees (the default waits up to 3 s): a test sweep's tasks run one
# after another (--exclusive), and took 3 s each where they ran for 0.3 s.
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
MinJobAge=3600
KillWait=5
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

is_up() {
  # No controller here: say so at once (sinfo retries for 9 s before it gives up).
  pgrep -x slurmctld >/dev/null || return 1
  local states  # captured first: with pipefail, `sinfo | grep -q` fails when sinfo gets SIGPIPE
  states=$(sinfo -h -o '%T' 2>/dev/null) || return 1
  grep -qE '^(idle|mixed|allocated)' <<< "$states"
}

start() {
  [ "$(id -u)" = 0 ] || die "start needs root (it writes $conf and runs the Slurm daemons)"
  install_if_missing
  if is_up; then say "already up: $(sinfo -h -o '%P %D %T' | head -1)"; return 0; fi
  write_conf
  if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- munged || die "munged did not start (see /var/log/munge/munged.log)"
  fi
  pgrep -x slurmctld >/dev/null || slurmctld || die "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
  pgrep -x slurmd >/dev/null || slurmd || die "slurmd did not start (see /var/log/slurm/slurmd.log)"
  for _ in $(seq 1 60); do
    if is_up; then say "up: $(sinfo -h -o '%P %D %T %c CPUs %m MB' | head -1)"; return 0; fi
    scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
    sleep 1
  done
  die "the node did not become idle within 60 s: $(sinfo -h -o '%T %E' 2>&1 | head -1)"
}

stop() {
  pkill -x slurmd 2>/dev/null || true
  pkill -x slurmctld 2>/dev/null || true
  pkill -x munged 2>/dev/null || true
  # Until they are gone (slurmctld saves its state first): a start right after must not find a dying one.
  for _ in $(seq 1 50); do
    pgrep -x slurmd >/dev/null || pgrep -x slurmctld >/dev/null || pgrep -x munged >/dev/null || { say "stopped"; return 0; }
    sleep 0.2
  done
  say "signalled; still exiting after 10 s: $(pgrep -x -l 'slurmd|munged' | tr '\n' ' ')$(pgrep -x -l slurmctld | tr '\n' ' ')"
}

status() {
  command -v sinfo >/dev/null || die "not installed (scripts/slurm-local.sh start installs slurm-wlm and munge)"
  if is_up; then sinfo; return 0; fi
  die "no cluster answers: $(sinfo 2>&1 | head -1)"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: scripts/slurm-local.sh start|stop|status" ;;
esac
