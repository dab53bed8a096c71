# bench/strict_job.sh, sourced by bench/supervise.sh,
# bench/run_policy_stages.sh, bench/launch_profile.sh, bench/launch_marks.sh
# and bench/cpu_profile.sh: the job they launch, a strict runner (net none,
# exec_writable false: the writable grants bound noexec), in DIR.
#
#   strict_job DIR   makes DIR/{bundle,work/tmp,data} (the writable ones
#                    open to every uid) and DIR/policy.json (0644)
strict_job() {
  local dir=$1
  mkdir -p "$dir"/{bundle,work/tmp,data}
  chmod 777 "$dir"/{work,work/tmp,data}
  cat >"$dir/policy.json" <<JSON
{"contract": 1, "role": "runner", "bundle": "$dir/bundle", "work": "$dir/work", "data": "$dir/data",
 "tmp": "$dir/work/tmp", "net": {"mode": "none"}, "exec_writable": false}
JSON
  chmod 644 "$dir/policy.json"
}
