#!/usr/bin/env bash
# A single-node Slurm on this machine, from Debian's packages, for the cluster tests:
# munge, MariaDB, slurmdbd (the executor plugin asks `sacct` for job status and
# `sacctmgr` for accounts), slurmctld and slurmd, one node `localhost` with 2 CPUs.
#
#   tests/cluster/local-slurm.sh up      install what is missing, start what is not running
#   tests/cluster/local-slurm.sh down    stop the daemons that `up` started
#   tests/cluster/local-slurm.sh status  exit 0 when the cluster takes jobs
#
# Everything lives under $AUTORESEARCH_SLURM_DIR (default /var/lib/autoresearch-slurm):
# its own slurm.conf (point SLURM_CONF at it), spool, logs and pid files; /etc/slurm is
# never touched. `up` is idempotent and returns at once when the cluster is already up.
# On success it prints KEY=VALUE lines: SLURM_CONF, PARTITION, ACCOUNT, STARTED (1 when
# this call started anything). Exit 3 means "cannot start here" (the reason on stderr);
# any other failure exits 1 and names the log to read.
set -euo pipefail

DIR="${AUTORESEARCH_SLURM_DIR:-/var/lib/autoresearch-slurm}"
CLUSTER=autoresearch
PARTITION=autoresearch
ACCOUNT=autoresearch-test
DB=autoresearch_slurm_acct
CONF="$DIR/etc/slurm.conf"
PACKAGES=(munge mariadb-server slurmdbd slurmctld slurmd slurm-client)
export SLURM_CONF="$CONF"

cannot() { echo "local Slurm cannot start here: $*" >&2; exit 3; }
fail() { echo "local Slurm failed: $*" >&2; exit 1; }

# Wait up to $1 seconds for the command that follows to succeed.
wait_until() {
    local limit=$1; shift
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# A process that exited but is not reaped yet (a zombie) counts as gone.
running() { local st; st="$(ps -o stat= -p "$1" 2>/dev/null)" && [ "${st:0:1}" != Z ]; }
alive() { [ -s "$1" ] && running "$(cat "$1")"; }

node_takes_jobs() {
    local state
    state="$(sinfo -h -n localhost -o %T 2>/dev/null)" || return 1
    case "$state" in idle|mixed|allocated|completing) return 0 ;; *) return 1 ;; esac
}

cluster_up() {
    alive "$DIR/run/slurmctld.pid" && alive "$DIR/run/slurmd.pid" \
        && alive "$DIR/run/slurmdbd.pid" && node_takes_jobs
}

report() {
    echo "SLURM_CONF=$CONF"
    echo "PARTITION=$PARTITION"
    echo "ACCOUNT=$ACCOUNT"
    echo "STARTED=$1"
}

install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || cannot "no apt-get to install ${missing[*]}"
    echo "installing ${missing[*]} (log: $DIR/log/apt.log)" >&2
    # Debian's package scripts try to start services; there is no init system to do it.
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}"; } >"$DIR/log/apt.log" 2>&1 \
        || cannot "apt-get install ${missing[*]} failed (see $DIR/log/apt.log)"
}

write_config() {
    local mem
    # The node's memory as slurmd itself measures it, or slurmd drains the node.
    mem="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
    mkdir -p "$DIR"/{etc,spool/ctld,spool/d,log,run}
    cat >"$CONF" <<EOF
# Written by tests/cluster/local-slurm.sh: a one-node cluster for the test suite.
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups needed (containers often lack a writable cgroup tree).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/linux
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# slurmd fetches this file from slurmctld and links it at /run/slurm/conf, where client
# commands look when /etc/slurm/slurm.conf is absent: the executor's job step drops
# every SLURM_* variable (SLURM_CONF too) before its nested srun.
SlurmctldParameters=enable_configless
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Accounting through slurmdbd, as on a real cluster: sacct answers job status and
# sbatch -A must name an account the user belongs to.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageEnforce=associations
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
# A cancelled job gets SIGTERM, then SIGKILL this many seconds later.
KillWait=10
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$DIR/etc/slurmdbd.conf" <<EOF
# Written by tests/cluster/local-slurm.sh.
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=$DB
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
EOF
    chmod 600 "$DIR/etc/slurmdbd.conf"  # slurmdbd refuses a config others can read
}

start_munge() {
    if munge -n </dev/null >/dev/null 2>&1; then return 0; fi
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    install -d -o munge -g munge -m 755 /run/munge
    install -d -o munge -g munge -m 700 /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged --pid-file="/run/munge/munged.pid"
    wait_until 20 munge -n </dev/null || fail "munged did not start (see /var/log/munge)"
    echo munge >>"$DIR/run/started"
}

start_mariadb() {
    if mariadb-admin ping >/dev/null 2>&1; then return 0; fi
    # MariaDB runs as mysql: its pid and log files go where that user may write.
    install -d -o mysql -g mysql -m 755 /run/mysqld "$DIR/mariadb"
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >"$DIR/log/mariadb-install.log" 2>&1
    setsid /usr/sbin/mariadbd --user=mysql --skip-networking \
        --pid-file="$DIR/mariadb/mariadb.pid" --log-error="$DIR/mariadb/mariadb.log" \
        </dev/null >/dev/null 2>&1 &
    wait_until 60 mariadb-admin ping || fail "MariaDB did not start (see $DIR/mariadb/mariadb.log)"
    echo mariadb >>"$DIR/run/started"
}

start_slurmdbd() {
    alive "$DIR/run/slurmdbd.pid" && return 0
    mariadb -e "CREATE DATABASE IF NOT EXISTS $DB"
    slurmdbd
    wait_until 60 sacctmgr -n list cluster || fail "slurmdbd did not answer (see $DIR/log/slurmdbd.log)"
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
    if ! sacctmgr -n -P list account format=account | grep -qx "$ACCOUNT"; then
        sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description=tests \
            organization=autoresearch >/dev/null
    fi
    if ! sacctmgr -n -P list assoc user="$(id -un)" account="$ACCOUNT" format=account \
        | grep -qx "$ACCOUNT"; then
        sacctmgr -i add user "$(id -un)" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
    fi
}

start_slurm() {
    alive "$DIR/run/slurmctld.pid" || slurmctld
    wait_until 60 scontrol ping || fail "slurmctld did not answer (see $DIR/log/slurmctld.log)"
    alive "$DIR/run/slurmd.pid" || slurmd -N localhost --conf-server localhost
    if ! wait_until 60 node_takes_jobs; then
        # A node left down by an earlier unclean stop comes back on request.
        scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
        wait_until 30 node_takes_jobs || fail "node localhost is $(sinfo -h -n localhost -o %T) \
(see $DIR/log/slurmd.log and $DIR/log/slurmctld.log)"
    fi
}

up() {
    if cluster_up; then report 0; return 0; fi
    [ "$(id -u)" -eq 0 ] || cannot "it needs root (to start munged, slurmd and MariaDB)"
    command -v dpkg-query >/dev/null || cannot "not a Debian system (no dpkg-query)"
    # Commands inside jobs that lose SLURM_CONF would read that file, not ours.
    [ ! -e /etc/slurm/slurm.conf ] || cannot "/etc/slurm/slurm.conf exists (a cluster of \
its own): run the tests on it with AUTORESEARCH_SLURM_PARTITION set instead"
    mkdir -p "$DIR/log" "$DIR/run"
    install_packages
    write_config
    start_munge
    start_mariadb
    start_slurmdbd
    start_slurm
    report 1
}

stop_pid() {
    local pidfile=$1 pid
    alive "$pidfile" || return 0
    pid="$(cat "$pidfile")"
    kill "$pid"
    wait_until 30 eval "! running $pid" || kill -9 "$pid" 2>/dev/null || true
}

down() {
    # Jobs still queued or running would hold the node; they are the tests' own.
    scancel --partition="$PARTITION" >/dev/null 2>&1 || true
    stop_pid "$DIR/run/slurmd.pid"
    stop_pid "$DIR/run/slurmctld.pid"
    stop_pid "$DIR/run/slurmdbd.pid"
    if grep -qx mariadb "$DIR/run/started" 2>/dev/null; then stop_pid "$DIR/mariadb/mariadb.pid"; fi
    if grep -qx munge "$DIR/run/started" 2>/dev/null; then stop_pid /run/munge/munged.pid; fi
    rm -f "$DIR/run/started"
    # slurmd leaves its config link behind; without it, client commands fail at once
    # instead of retrying a controller that is gone.
    if [ "$(readlink /run/slurm/conf 2>/dev/null)" = "$DIR/spool/d/conf-cache" ]; then
        rm -f /run/slurm/conf
    fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) cluster_up ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
