gym_user=$(id -un)
printf '%s\n' __GYM_LIMITS:account:acct
scontrol show assoc_mgr users="$gym_user" accounts=acct flags=assoc 2>/dev/null | head -c 262144
echo
# Which QOS a job without --qos gets, and a per-user QOS limit slurmctld states only once the user
# has had a job in it: the accounting database's, where this node reaches it. Bounded in time, and
# asked twice only when it answered once (a database out of reach costs one timeout).
gym_qos_names=''
if gym_qos_defaults=$(timeout 10 sacctmgr -nP show assoc where user="$gym_user" format=Cluster,Account,Partition,QOS,DefaultQOS 2>/dev/null); then
  printf '%s\n' __GYM_LIMITS:qos-defaults
  printf '%s\n' "$gym_qos_defaults" | head -c 262144
  echo
  printf '%s\n' __GYM_LIMITS:qos-table
  timeout 10 sacctmgr -nP show qos format=Name,MaxSubmitPU 2>/dev/null | head -c 262144
  echo
  # Every QOS a job could get: the allowed and default ones of each association, and Slurm's own.
  gym_qos_names+=,$(printf '%s\n' "$gym_qos_defaults" | cut -d'|' -f4,5 | tr '|' , | paste -sd, -),normal
fi
# Those QOSes as slurmctld holds them, with their use: each one's own lines and only this user's
# entry among its users' (every user of a QOS has one; their TRES lines are most of the text).
gym_qos_names=$(printf '%s\n' "$gym_qos_names" | tr , '\n' | grep -E '^[A-Za-z0-9_.-]+$' | sort -u | paste -sd, -)
if [ -n "$gym_qos_names" ]; then
  printf '%s\n' __GYM_LIMITS:user
  printf '%s(%s)\n' "$gym_user" "$(id -u)"
  printf '%s\n' __GYM_LIMITS:qos
  scontrol show assoc_mgr users="$gym_user" qos="$gym_qos_names" flags=qos 2>/dev/null |
    python3 -E -s -c '<shipping.inline(Program.SCHEDULER_HOST)>' own-qos "$gym_user" "$(id -u)" 2>/dev/null | head -c 262144
  echo
fi
true
