# Sourced by tests/e2e/slurm_cluster.sh: a Slurm cluster private to a test, its whole state in
# one scratch directory. munged (a key made for the test, its own socket), slurmctld and slurmd
# from Debian's munge and slurm-wlm, configured for localhost on free ports, with nothing of the
# machine's own configuration used. Needs root (slurmd starts jobs as their owner). Every daemon
# started here is stopped by slurm_cluster_stop, by process id.
# Its nodes: "node1", the default partition "test"; and where slurmd is built with Slurm's
# multiple-slurmd support (Debian's is: scontrol show config says MULTIPLE_SLURMD = Yes), a second
# slurmd on the same host as node "node2" (its own port, spool directory and log), which with
# "node1" makes partition "two": a job there with --nodes=2 runs on two nodes as Slurm sees them
# (SLURM_NODEID 0 and 1, PMI-2 placing its tasks on two nodes). TEST_SLURM_TWO_NODES says whether
# that node is up (1) or not (0). Neither node is named after the host: Slurm refuses a node
# named as the host name another node gives (NodeHostname=localhost for both).

# slurm_cluster_missing: prints why no cluster can be started here (and returns 0), or returns 1.
slurm_cluster_missing() {
  if [[ $(id -u) != 0 ]]; then
    echo "not running as root (slurmd must start jobs as their owner)"
    return 0
  fi
  local tool
  for tool in munged munge slurmctld slurmd sbatch srun scontrol squeue scancel; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "no $tool (tools/setup.sh installs Debian's munge, slurmctld, slurmd and slurm-client)"
      return 0
    fi
  done
  return 1
}

# slurm_free_port: a TCP port on localhost that nothing listens on now.
slurm_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# slurm_cluster_start DIR CPUS: starts the daemons with their files under DIR (which must exist,
# every directory above it searchable by all, as munged requires of its socket's) and waits
# until the nodes (CPUS each) take jobs. Exports SLURM_CONF for the client commands; clears the
# variables of any enclosing Slurm job.
slurm_cluster_start() {
  local dir=$1 cpus=$2
  TEST_SLURM_DIR=$dir
  TEST_SLURM_PIDS=()
  unset "${!SLURM_@}"
  # munged insists that every directory above its socket be searchable by all, and that its key
  # be private.
  chmod 755 "$dir"
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool/node1" "$dir/spool/node2" "$dir/log"
  chmod 700 "$dir/state" "$dir/spool" "$dir/spool/node1" "$dir/spool/node2"
  head -c 1024 /dev/urandom > "$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  local socket=$dir/munge/munge.socket
  munged --foreground --key-file="$dir/munge/munge.key" --socket="$socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >"$dir/log/munged.out" 2>&1 &
  TEST_SLURM_PIDS+=($!)
  local i
  for i in $(seq 1 100); do
    munge -n -S "$socket" >/dev/null 2>&1 && break
    sleep 0.1
  done
  munge -n -S "$socket" >/dev/null 2>&1 || { cat "$dir/log/munged.out" >&2; return 1; }

  local port=$(slurm_free_port) port2=$(slurm_free_port)
  cat >"$dir/slurm.conf" <<EOF
ClusterName=mgt-test
SlurmctldHost=localhost
SlurmctldPort=$(slurm_free_port)
SlurmdPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmi2
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
KillWait=30
SlurmdParameters=config_overrides
NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=$cpus State=UNKNOWN
NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port2 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=node1 Default=YES MaxTime=INFINITE State=UP
PartitionName=two Nodes=node1,node2 MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -i >"$dir/log/slurmctld.out" 2>&1 &
  TEST_SLURM_PIDS+=($!)
  slurmd -D -N node1 >"$dir/log/slurmd-node1.out" 2>&1 &
  TEST_SLURM_PIDS+=($!)
  TEST_SLURM_TWO_NODES=0
  slurm_node_idle node1 "$dir/log/slurmd-node1.out" || return 1
  # The second node needs slurmd's multiple-slurmd support: without it, it is not started (and
  # stays down, its partition's jobs pending).
  scontrol show config | grep -E '^MULTIPLE_SLURMD += Yes' >/dev/null || return 0
  slurmd -D -N node2 >"$dir/log/slurmd-node2.out" 2>&1 &
  TEST_SLURM_PIDS+=($!)
  slurm_node_idle node2 "$dir/log/slurmd-node2.out" || return 1
  TEST_SLURM_TWO_NODES=1
}

# slurm_node_idle NODE SLURMD_OUTPUT: waits until NODE takes jobs; says why not after a minute.
slurm_node_idle() {
  local i
  for i in $(seq 1 300); do
    [[ $(sinfo -h -n "$1" -o %t 2>/dev/null) == idle ]] && return 0
    sleep 0.2
  done
  echo "the test cluster's node $1 never became idle:" >&2
  sinfo >&2 || true
  tail -n 20 "$TEST_SLURM_DIR/log/slurmctld.out" "$2" >&2 || true
  return 1
}

# slurm_cluster_stepds: the process ids of this cluster's slurmstepd processes (one per running
# job step; each keeps the cluster's slurmd log open).
slurm_cluster_stepds() {
  local p fd
  for p in $(pgrep -x slurmstepd || true); do
    for fd in "/proc/$p/fd/"*; do
      if [[ $(readlink "$fd" 2>/dev/null) == "$TEST_SLURM_DIR"/* ]]; then
        echo "$p"
        break
      fi
    done
  done
}

# slurm_cluster_stop: cancels what still runs and waits for the job steps to end (a slurmstepd
# whose slurmd or slurmctld has gone would wait for them for ever), stops slurmd, slurmctld and
# munged, in that order, and waits for each to be gone. Safe to call twice, or after a partial
# start.
slurm_cluster_stop() {
  [[ -n ${TEST_SLURM_DIR:-} ]] || return 0
  local i k pid
  if [[ ${#TEST_SLURM_PIDS[@]} -ge 3 ]]; then
    scancel --full --quiet --user=root >/dev/null 2>&1 || true
    # Slurm gives a cancelled step KillWait (30 s) before SIGKILL.
    for i in $(seq 1 200); do
      [[ -z $(squeue -h -o %i 2>/dev/null) && -z $(slurm_cluster_stepds) ]] && break
      sleep 0.2
    done
  fi
  for ((k = ${#TEST_SLURM_PIDS[@]} - 1; k >= 0; k--)); do
    pid=${TEST_SLURM_PIDS[k]}
    kill -TERM "$pid" 2>/dev/null || continue
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  for pid in $(slurm_cluster_stepds); do kill -KILL "$pid" 2>/dev/null || true; done
  TEST_SLURM_PIDS=()
  TEST_SLURM_DIR=""
}

# slurm_job_field ID FIELD: FIELD's value (JobState, ExitCode, Restarts, ...) in the one-line
# record of job ID (the first record for an array job).
slurm_job_field() {
  scontrol show job -o "$1" 2>/dev/null | head -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# slurm_wait_gone SECONDS ID...: waits until none of the jobs is pending or running; fails
# after SECONDS.
slurm_wait_gone() {
  local limit=$1
  shift
  local ids
  ids=$(IFS=,; echo "$*")
  local deadline=$((SECONDS + limit))
  while [[ -n $(squeue -h -j "$ids" -o %i 2>/dev/null) ]]; do
    if ((SECONDS > deadline)); then
      echo "jobs still queued after ${limit}s:" >&2
      squeue -j "$ids" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}
