gym_user=$(id -un)
printf '%s\n' __GYM_LIMITS:account:acct
scontrol show assoc_mgr users="$gym_user" accounts=acct flags=assoc 2>/dev/null | head -c 262144
echo
printf '%s\n' __GYM_LIMITS:qos
scontrol show assoc_mgr users="$gym_user" flags=qos 2>/dev/null | head -c 262144
echo
# Which QOS a job without --qos gets, and a per-user QOS limit slurmctld states only once the user
# has had a job in it: the accounting database's, where this node reaches it. Bounded in time, and
# asked twice only when it answered once (a database out of reach costs one timeout).
if gym_qos_defaults=$(timeout 10 sacctmgr -nP show assoc where user="$gym_user" format=Cluster,Account,Partition,QOS,DefaultQOS 2>/dev/null); then
  printf '%s\n' __GYM_LIMITS:qos-defaults
  printf '%s\n' "$gym_qos_defaults" | head -c 262144
  echo
  printf '%s\n' __GYM_LIMITS:qos-table
  timeout 10 sacctmgr -nP show qos format=Name,MaxSubmitPU 2>/dev/null | head -c 262144
  echo
fi
true
