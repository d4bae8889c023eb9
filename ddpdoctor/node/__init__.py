"""This machine's facts and health, before any rendezvous: one NVML wrapper, RDMA ports and host
settings from sysfs, a short compute and bandwidth test, the judges over them, and the many-node
view; and what `env` and the checks read of this machine (envinfo, gpus, redact) (group by digest, name the odd nodes, write the exclude list)."""
