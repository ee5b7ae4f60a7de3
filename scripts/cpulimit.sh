# Sourced by the measuring scripts (observers.sh, zkport.sh): cpu_limit
# PID NAME puts process PID in a cgroup of its own, NAME, with $CPU cores'
# worth of CPU time (a cgroup v2 or v1 CPU quota; needs root), as if it
# ran on a small machine of its own, and adds the cgroup to the array
# cgroups, for the caller to remove (rmdir) once its processes are gone.
cpu_limit() {
  local quota period=100000 g
  quota=$(awk -v c="$CPU" 'BEGIN { printf "%d", c * 100000 }')
  if [ -w /sys/fs/cgroup/cgroup.subtree_control ]; then # v2
    g=/sys/fs/cgroup/$2
    mkdir -p "$g"
    echo "$quota $period" >"$g/cpu.max"
  else # v1
    g=/sys/fs/cgroup/cpu/$2
    mkdir -p "$g"
    echo "$period" >"$g/cpu.cfs_period_us"
    echo "$quota" >"$g/cpu.cfs_quota_us"
  fi
  echo "$1" >"$g/cgroup.procs"
  cgroups+=("$g")
}
