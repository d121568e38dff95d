#!/usr/bin/env bash
# A "cluster" that runs each job as its own detached local process.
# Snakemake calls this with the job script as the last argument and reads a job id
# from stdout; the job script itself writes the finished/failed marker files that
# the cluster-generic executor polls for, so no status command is needed.
set -euo pipefail
jobscript="${@: -1}"
logdir="${AUTORESEARCH_CLUSTER_LOGS:-.snakemake/cluster-generic-logs}"
mkdir -p "$logdir"
name="$(basename "$jobscript" .sh)"
# Detach fully (no shared stdout), or Snakemake would wait for the job to end.
nohup bash "$jobscript" >"$logdir/$name.out" 2>&1 </dev/null &
echo "$!"
