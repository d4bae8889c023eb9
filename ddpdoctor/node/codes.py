"""The codes `ddpdoctor node` reports (DDN…): what is wrong with one node, why it stops a
distributed job, and the one-line fix. Module constants, so judges return them and tests
compare findings by equality (Django's system-check habit). Codes are a contract: add, never
renumber or reuse."""

from __future__ import annotations

from ddpdoctor.report.model import Level
from ddpdoctor.report.problems import Problem

_W, _F, _I = Level.WARN, Level.FAIL, Level.INFO

# GPUs and NVML -----------------------------------------------------------------------------------
GPU_COUNT = Problem(
    "DDN101",
    "gpu-count",
    _F,
    "Fewer (or more) GPUs than this machine type has",
    "A GPU that fell off the bus or failed to initialise disappears from NVML; torchrun then "
    "starts fewer ranks on this node, or a rank binds to a GPU that is not there.",
    "Drain the node; check `nvidia-smi -q` and the kernel log for Xid 79, reseat or replace the GPU.",
)
NVML_MISSING = Problem(
    "DDN102",
    "nvml-unavailable",
    _F,
    "GPUs are expected but NVML cannot be read",
    "Without the driver's management library no GPU fact can be checked, and CUDA usually fails too.",
    "Install or reload the NVIDIA driver (`nvidia-smi` must work) and rerun.",
)
GPU_MODEL = Problem(
    "DDN103",
    "gpu-model",
    _F,
    "A GPU of another model than expected",
    "Mixed models run at different speeds: every step waits for the slowest GPU.",
    "Fix the node's inventory, or give this machine type its own entry in the --expect file.",
)
NO_GPU = Problem(
    "DDN104",
    "no-gpu",
    _I,
    "No GPU on this node: the GPU checks are skipped",
    "Nothing to check without NVML; the host and CPU checks still run.",
    "Nothing to do on a CPU node; on a GPU node, see why NVML is missing.",
)
# GPU memory ------------------------------------------------------------------------------------
ECC_UNCORRECTED = Problem(
    "DDN110",
    "ecc-uncorrectable",
    _F,
    "Uncorrectable ECC errors since the driver loaded",
    "An uncorrectable memory error kills the CUDA context of every process on that GPU: the "
    "rank crashes and the whole job with it.",
    "Drain the node, reset the GPU (nvidia-smi -r) and run `dcgmi diag -r 3`; replace it if errors return.",
)
ECC_HISTORY = Problem(
    "DDN111",
    "ecc-history",
    _W,
    "Uncorrectable ECC errors in the GPU's lifetime",
    "Past uncorrectable errors make new ones more likely; the board is worth watching.",
    "Watch the count; run `dcgmi diag -r 3` and plan a replacement if it keeps growing.",
)
ECC_OFF = Problem(
    "DDN112",
    "ecc-off",
    _W,
    "ECC is off, or a change of ECC mode waits for a reboot",
    "Without ECC a flipped bit silently corrupts gradients instead of stopping the job.",
    "Enable ECC (nvidia-smi -e 1) and reboot, the same on every node.",
)
RETIRED_PAGES = Problem(
    "DDN113",
    "retired-pages",
    _F,
    "Retired memory pages pending, or too many",
    "A page pending retirement is still in use until the driver reloads; many retired pages "
    "mean failing memory.",
    "Reboot (or reload the driver) to retire pending pages; replace the GPU above the limit.",
)
REMAP_PENDING = Problem(
    "DDN114",
    "row-remap-pending",
    _F,
    "A memory row remapping waits for a GPU reset",
    "The faulty row stays in use until the GPU is reset; more uncorrectable errors can follow.",
    "Drain the node and reset the GPU (nvidia-smi -r, or reboot) to activate the remapping.",
)
REMAP_FAILED = Problem(
    "DDN115",
    "row-remap-failed",
    _F,
    "A memory row remapping failed",
    "The GPU ran out of spare rows: the faulty memory cannot be mapped away.",
    "Take the node out of service and replace the GPU.",
)
XID = Problem(
    "DDN116",
    "xid",
    _F,
    "The driver logged an Xid error for a GPU",
    "Xid errors are the driver's record of GPU faults; hardware Xids (48, 74, 79, 94, 95, ...) "
    "end or corrupt every job on that GPU.",
    "Look the Xid up in NVIDIA's Xid catalogue; drain the node for hardware Xids and reset the GPU.",
)
# links -----------------------------------------------------------------------------------------
NVLINK_DOWN = Problem(
    "DDN120",
    "nvlink-down",
    _F,
    "An NVLink is down",
    "NCCL routes around a dead link over PCIe or fails to build its rings: all_reduce on this "
    "node slows to a fraction, or hangs.",
    "Drain the node; reset the GPUs, then check the NVLink bridge or baseboard (`nvidia-smi nvlink -s`).",
)
NVLINK_ERRORS = Problem(
    "DDN121",
    "nvlink-errors",
    _W,
    "NVLink error counters are not zero",
    "Replays, recoveries and CRC errors mean a marginal link that retransmits: slower, then down.",
    "Watch `nvidia-smi nvlink -e`; reset the counters and retest; replace the part if they grow.",
)
PCIE_WIDTH = Problem(
    "DDN122",
    "pcie-width",
    _F,
    "A GPU's PCIe link runs narrower than it can",
    "A x16 GPU that trained at x8 or x4 moves host copies and non-NVLink traffic at half speed "
    "or less; the whole job waits for it.",
    "Reseat the GPU or riser; check the slot and cable; reboot and compare `nvidia-smi -q -d PCIE`.",
)
PCIE_GEN = Problem(
    "DDN123",
    "pcie-gen",
    _W,
    "A GPU's PCIe link runs at a lower generation than it can",
    "Under load a lower generation halves the bandwidth per step down; idle GPUs lower it on "
    "purpose to save power, so it only counts while the GPU is busy.",
    "Rerun while the GPU is busy; if it stays low, check the BIOS PCIe settings and the riser.",
)
FABRIC = Problem(
    "DDN124",
    "fabric-manager",
    _F,
    "NVSwitch present but the fabric is not up",
    "On NVSwitch systems CUDA cannot start until the fabric manager has set up the fabric: "
    "every rank fails at its first CUDA call ('system not yet initialized').",
    "Start the fabric manager (systemctl start nvidia-fabricmanager) with the driver's exact version.",
)
# clocks, temperature, power, modes ------------------------------------------------------------
THROTTLED = Problem(
    "DDN130",
    "clocks-throttled",
    _F,
    "GPU clocks are held down by hardware, heat or power",
    "A throttled GPU computes slower; in DDP every rank waits for it at each all_reduce.",
    "Check cooling and power delivery (`nvidia-smi -q -d PERFORMANCE`); drain the node if it persists.",
)
HOT = Problem(
    "DDN131",
    "temperature",
    _W,
    "A GPU runs close to its slowdown temperature",
    "At the slowdown threshold the GPU lowers its clocks on its own.",
    "Check the fans, air flow and inlet temperature of this node.",
)
POWER_CAP = Problem(
    "DDN132",
    "power-capped",
    _W,
    "A GPU's power limit is below its default",
    "A lowered limit (nvidia-smi -pl) caps the clocks under load: a slow rank.",
    "Restore the default limit (nvidia-smi -pl <default>) the same on every node.",
)
PERSISTENCE = Problem(
    "DDN133",
    "persistence-off",
    _W,
    "Persistence mode is off",
    "Without it the driver tears down between jobs: every start pays seconds of GPU "
    "initialisation, and start-up timeouts get closer.",
    "Enable it at boot (the nvidia-persistenced service, or nvidia-smi -pm 1).",
)
MIG = Problem(
    "DDN134",
    "mig-mode",
    _W,
    "MIG is enabled, or a MIG change waits for a reset",
    "With MIG a process sees a slice of the GPU, NVLink peer access is gone and NCCL falls back "
    "to slow paths; a pending change applies only after a reset.",
    "Disable MIG for training nodes (nvidia-smi -mig 0) and reset the GPU.",
)
# software ---------------------------------------------------------------------------------------
VERSION = Problem(
    "DDN140",
    "version",
    _F,
    "Driver, CUDA, NCCL or torch version differs from what is expected",
    "Nodes with other versions disagree on wire formats or features: collectives hang or crash "
    "only when that node joins.",
    "Install the expected versions (the same image on every node), or update the --expect file.",
)
# RDMA -------------------------------------------------------------------------------------------
RDMA_DOWN = Problem(
    "DDN150",
    "rdma-port-down",
    _F,
    "An RDMA port is not active, or fewer ports than expected",
    "NCCL uses every active port it finds; a node with a port down either runs slower than the "
    "others or fails to connect its rails.",
    "Check the cable and switch port (`ibstat`); bring the port up or drain the node.",
)
RDMA_FLAPPING = Problem(
    "DDN151",
    "rdma-flapping",
    _F,
    "An RDMA link went down while we watched",
    "A flapping link drops NCCL's connections: the job hangs or fails with a transport error "
    "minutes into training.",
    "Replace the cable or transceiver, or move the port; drain the node until then.",
)
RDMA_ERRORS = Problem(
    "DDN152",
    "rdma-errors",
    _W,
    "RDMA error counters grew while we watched",
    "Symbol and receive errors mean retransmits on a marginal link: lower bandwidth, later a flap.",
    "Check the cable and transceiver; clear the counters (perfquery -x) and watch them.",
)
RDMA_RATE = Problem(
    "DDN153",
    "rdma-rate",
    _W,
    "An RDMA port trained at a lower rate than the others",
    "A port at a fraction of the rate makes its rail the slowest one for every collective.",
    "Reseat or replace the cable; check the switch port's speed settings.",
)
# host -------------------------------------------------------------------------------------------
SHM_SMALL = Problem(
    "DDN160",
    "shm-small",
    _W,
    "/dev/shm is small",
    "NCCL keeps intra-node buffers and DataLoader workers pass batches through /dev/shm; a small "
    "one ends in 'Bus error' or NCCL shared-memory failures.",
    "Give the container more (docker --shm-size=16g or --ipc=host) or grow the tmpfs.",
)
MEMLOCK = Problem(
    "DDN161",
    "memlock-limit",
    _F,
    "The locked-memory limit is not unlimited on an RDMA node",
    "RDMA pins its buffers; under a small `ulimit -l` NCCL cannot register memory and falls back "
    "to sockets or fails.",
    "Set `memlock unlimited` in /etc/security/limits.conf (and LimitMEMLOCK=infinity for slurmd/docker).",
)
GOVERNOR = Problem(
    "DDN162",
    "cpu-governor",
    _W,
    "The CPU frequency governor is not 'performance'",
    "Power-saving governors slow the CPU side of every step (kernel launches, data loading, "
    "NCCL's proxy threads).",
    "Set the governor to performance (cpupower frequency-set -g performance) on every node.",
)
# speed ----------------------------------------------------------------------------------------
COMPUTE_SLOW = Problem(
    "DDN170",
    "compute-slow",
    _F,
    "A device computes slower than its floor",
    "One slow device makes every rank wait at each all_reduce, even when its links are fine.",
    "Check clocks and throttle reasons of that device, then run `dcgmi diag -r 3`; drain the node if it stays slow.",
)
MEMORY_SLOW = Problem(
    "DDN171",
    "memory-slow",
    _F,
    "A device copies memory slower than its floor",
    "Low memory bandwidth slows every layer of the model on that device.",
    "Check memory clocks and ECC state; run `dcgmi diag -r 3`; drain the node if it stays slow.",
)
SLOWER_THAN_PEERS = Problem(
    "DDN172",
    "device-slower-than-peers",
    _F,
    "A device is much slower than the others of this node",
    "Devices of one model should measure alike; one far below the median is sick or throttled.",
    "Compare its clocks, temperature and throttle reasons with its neighbours; drain the node.",
)
# many nodes -------------------------------------------------------------------------------------
NODE_DIFFERS = Problem(
    "DDN180",
    "node-differs",
    _F,
    "A node's facts differ from the other nodes'",
    "Nodes of one job should be identical; an odd driver, GPU count or link state is the node "
    "that hangs or slows the job.",
    "Bring the odd nodes in line, or leave them out (srun --exclude) until they are.",
)
NODE_MISSING = Problem(
    "DDN181",
    "node-missing",
    _F,
    "A node wrote no report",
    "A node that did not even finish a local check will not join a rendezvous either.",
    "Log in to it: is it up, is the shared folder mounted there, did srun start the task?",
)
NODE_SLOW = Problem(
    "DDN182",
    "node-slow",
    _F,
    "A node measures far below the cluster's median",
    "The slowest node sets the pace of every step of a synchronous job.",
    "Look at that node's compute and bandwidth rows and its clocks; exclude it until fixed.",
)
NODE_FAILED = Problem(
    "DDN183",
    "node-failed",
    _F,
    "A node failed its own checks",
    "The node's own report found a failure (its codes are listed).",
    "Read that node's report (its JSON in the --out folder) and fix or exclude it.",
)
# the run itself -------------------------------------------------------------------------------
PROBE_TIMEOUT = Problem(
    "DDN190",
    "probe-timeout",
    _F,
    "A probe did not answer within the deadline",
    "A GPU that fell off the bus makes NVML (and nvidia-smi) hang; the node is not usable.",
    "Drain the node and look at the kernel log; rerun with a larger --timeout if it was only slow.",
)
PROBE_CRASHED = Problem(
    "DDN192",
    "probe-crashed",
    _W,
    "A probe of ddpdoctor itself crashed",
    "The facts it would have read are unknown, so their checks could not run; the others did.",
    "Rerun with -v and report it to ddpdoctor with the message; the other rows are still valid.",
)
NEVER_JOINED = Problem(
    "DDN191",
    "never-joined",
    _F,
    "A node never joined the rendezvous",
    "The rendezvous waits for every node; one that never arrives blocks all the others.",
    "Run `ddpdoctor node` on that node; exclude it (srun --exclude) to start without it.",
)
NODE_UNREACHABLE = Problem(
    "DDN193",
    "node-unreachable",
    _F,
    "A node cannot be reached from the nodes that reach each other",
    "Every rank talks to every other: a node that no healthy node can connect to keeps the job "
    "from forming (or hangs it) for everyone.",
    "Check that node's network (ip link, cabling, switch port, firewall) or exclude it (srun --exclude).",
)
LINK_DOWN = Problem(
    "DDN194",
    "link-down",
    _F,
    "Two nodes that reach the others cannot reach each other",
    "A collective needs every pair of nodes: one broken path hangs the job although both nodes "
    "look healthy on their own.",
    "Look at the route and the firewall between the two (ip route get, iptables -L, the switch); "
    "exclude one end to run without it.",
)
STORE_UNREACHABLE = Problem(
    "DDN195",
    "store-unreachable",
    _F,
    "This node cannot reach the rendezvous store",
    "torchrun's nodes meet in a store on one node; a node that cannot connect to it never joins.",
    "Check that the store's host name resolves here and its port is open (nc -vz HOST PORT); "
    "run with --localize to tell this node's link from the store host's.",
)

ALL: tuple[Problem, ...] = tuple(v for v in globals().values() if isinstance(v, Problem))
