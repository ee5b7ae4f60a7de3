# Sourced by the measuring scripts that start processes (compare.sh,
# observers.sh, singlewrite.sh, storm.sh): pids holds the processes
# started, and stop ends them (SIGTERM), waits for them and empties pids.
pids=()
stop() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  pids=()
}
