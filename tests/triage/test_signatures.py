"""Every root-cause category, in several real phrasings: old and new torch/NCCL wording, with
and without launcher prefixes, wrapped over two lines, with ANSI colour, as prose in a ticket.

The lines are the message texts of the torch, NCCL and gloo sources and of public bug reports
(GitHub issues of pytorch, NCCL, Megatron-LM, LlamaFactory, ...); the CPU-reproducible ones are
also in tests/fixtures/triage/real/ as captured from real runs.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from ddpdoctor.triage.matcher import explain_text
from ddpdoctor.triage.prose import PROSE_SIGNATURES
from ddpdoctor.triage.signatures import ROOT_CAUSES, SIGNATURES, prefilter_pattern

EXAMPLES: list[tuple[str, str]] = [
    # PG_NOT_INITIALIZED
    (
        "PG_NOT_INITIALIZED",
        "ValueError: Default process group has not been initialized, please make sure to call init_process_group.",
    ),
    (
        "PG_NOT_INITIALIZED",
        "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.",
    ),
    ("PG_NOT_INITIALIZED", "AssertionError: Default process group is not initialized"),
    (
        "PG_NOT_INITIALIZED",
        "[rank1]: ValueError: Invalid process group specified or has been destroyed.",
    ),
    (
        "PG_NOT_INITIALIZED",
        "[rank0]: RuntimeError: Default process group has not been initialized, please make sure to call\n[rank0]: init_process_group.",
    ),
    # LAUNCH_ENV
    (
        "LAUNCH_ENV",
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, but not set",
    ),
    (
        "LAUNCH_ENV",
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR expected, but not set",
    ),
    ("LAUNCH_ENV", "train.py: error: unrecognized arguments: --local-rank=0"),
    ("LAUNCH_ENV", "main.py: error: unrecognized arguments: --local_rank=3"),
    ("LAUNCH_ENV", "    local_rank = int(os.environ['LOCAL_RANK'])\nKeyError: 'LOCAL_RANK'"),
    # PORT_IN_USE
    (
        "PORT_IN_USE",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
    ),
    (
        "PORT_IN_USE",
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
    ),
    ("PORT_IN_USE", "RuntimeError: Address already in use"),
    (
        "PORT_IN_USE",
        "[W socket.cpp:436] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
    ),
    # DEVICE_MAPPING
    (
        "DEVICE_MAPPING",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 0 and rank 1 both on CUDA device 2000",
    ),
    (
        "DEVICE_MAPPING",
        "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
    ),
    (
        "DEVICE_MAPPING",
        "RuntimeError: CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at some other API call",
    ),
    ("DEVICE_MAPPING", "[rank5]: torch.AcceleratorError: CUDA error: invalid device ordinal"),
    (
        "DEVICE_MAPPING",
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!",
    ),
    ("DEVICE_MAPPING", "All 8 processes run on GPU 0 while the other GPUs are idle"),
    (
        "DEVICE_MAPPING",
        "|    0   N/A  N/A     41234      C   python                           10240MiB |\n|    0   N/A  N/A     41235      C   python                            9200MiB |\n|    0   N/A  N/A     41236      C   python                            9200MiB |",
    ),
    (
        "DEVICE_MAPPING",
        "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
    ),
    (
        "DEVICE_MAPPING",
        "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    ),
    (
        "DEVICE_MAPPING",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    ),
    # COLLECTIVE_TIMEOUT
    (
        "COLLECTIVE_TIMEOUT",
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=64088, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800084 milliseconds before timing out.",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "RuntimeError: [Rank 1]: Ranks 2, 3 failed to pass monitoredBarrier in 30000 ms",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "[rank144]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 144] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:10895",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "RuntimeError: NCCL communicator was aborted on rank 1. Original reason for failure was: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1806856 milliseconds before timing out.",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
    ),
    (
        "COLLECTIVE_TIMEOUT",
        "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.",
    ),
    # NCCL_NETWORK
    (
        "NCCL_NETWORK",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201, internal error, NCCL version 2.14.3\nncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found",
    ),
    ("NCCL_NETWORK", "node1:1958:1958 [3] NCCL WARN Bootstrap : no socket interface found"),
    (
        "NCCL_NETWORK",
        "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
    ),
    (
        "NCCL_NETWORK",
        "gpu-node7:12345:12399 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.12<44120> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
    ),
    ("NCCL_NETWORK", "gpu-node7:12345:12399 [2] NCCL WARN Call to ibv_create_qp failed"),
    (
        "NCCL_NETWORK",
        "gpu-node2:5555:5600 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.2.3<43951> failed : Software caused connection abort",
    ),
    (
        "NCCL_NETWORK",
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: eth0",
    ),
    (
        "NCCL_NETWORK",
        "NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
    ),
    (
        "NCCL_NETWORK",
        "Training hangs at the first all_reduce; with NCCL_P2P_DISABLE=1 it works. IOMMU is enabled on this host.",
    ),
    (
        "NCCL_NETWORK",
        "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
    ),
    (
        "NCCL_NETWORK",
        "node3:4242:4300 [1] transport/p2p.cc:190 NCCL WARN failed to open CUDA IPC handle : 201 invalid device context",
    ),
    (
        "NCCL_NETWORK",
        "misc/ibvwrap.cc:212 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
    ),
    (
        "NCCL_NETWORK",
        "node1:100:200 [0] NCCL WARN Connect to 10.0.0.2<45678> failed : Connection refused",
    ),
    # SHM
    (
        "SHM",
        "RuntimeError: DataLoader worker (pid 46794) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
    ),
    (
        "SHM",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    ),
    (
        "SHM",
        "host:2211:2290 [1] include/shm.h:48 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-WIbVAb (size 9637888)",
    ),
    (
        "SHM",
        "RuntimeError: unable to write to file </torch_18692_1940622213_0>: No space left on device (28)",
    ),
    (
        "SHM",
        "RuntimeError: unable to open shared memory object </torch_32422_2953711829> in read-write mode: Too many open files (24)",
    ),
    (
        "SHM",
        "RuntimeError: unable to mmap 1024 bytes from file </torch_1234_5678_0>: Cannot allocate memory (12)",
    ),
    (
        "SHM",
        "torchrun: exitcode  : -7 (pid: 4242)\n  traceback : Signal 7 (SIGBUS) received by PID 4242",
    ),
    # UNUSED_PARAMETERS
    (
        "UNUSED_PARAMETERS",
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. You can enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`",
    ),
    (
        "UNUSED_PARAMETERS",
        "[rank3]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has\n[rank3]: parameters that were not used in producing loss.",
    ),
    ("UNUSED_PARAMETERS", "Parameter indices which did not receive grad for rank 0: 12 13"),
    (
        "UNUSED_PARAMETERS",
        "RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a module parameter outside the `forward` function.",
    ),
    (
        "UNUSED_PARAMETERS",
        "[W reducer.cpp:1346] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph every iteration",
    ),
    (
        "UNUSED_PARAMETERS",
        "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your training graph has changed in this iteration, e.g., one parameter is used in first iteration, but then got unused in the second iteration. this is not compatible with static_graph set to True.",
    ),
    # COLLECTIVE_MISMATCH
    (
        "COLLECTIVE_MISMATCH",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[20, 10], TensorDtypes=Float), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=BROADCAST).",
    ),
    (
        "COLLECTIVE_MISMATCH",
        "what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes. 8 vs 4",
    ),
    (
        "COLLECTIVE_MISMATCH",
        "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39.",
    ),
    (
        "COLLECTIVE_MISMATCH",
        "transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536",
    ),
    (
        "COLLECTIVE_MISMATCH",
        "RuntimeError: DDP expects same model across all ranks, but Rank 0 has 204 params, while rank 1 has inconsistent 202 params.",
    ),
    (
        "COLLECTIVE_MISMATCH",
        "node1:123:456 [0] NCCL WARN NET/Socket : peer 10.0.0.2<52310> message truncated : receiving 1048576 bytes instead of 65536",
    ),
    # RENDEZVOUS
    ("RENDEZVOUS", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"),
    (
        "RENDEZVOUS",
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect to (10.0.0.1, 29500).",
    ),
    (
        "RENDEZVOUS",
        "[W socket.cpp:764] [c10d] The IPv6 network addresses of (master-0, 29500) cannot be retrieved (gai error: -2 - Name or service not known).",
    ),
    (
        "RENDEZVOUS",
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
    ),
    ("RENDEZVOUS", "RuntimeError: connect() timed out. Original timeout was 1800000 ms."),
    (
        "RENDEZVOUS",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
    ),
    ("RENDEZVOUS", "RuntimeError: Socket Timeout"),
    (
        "RENDEZVOUS",
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [master-0]:29500 (errno: 111 - Connection refused).",
    ),
    # GRADSCALER
    ("GRADSCALER", "ValueError: Attempting to unscale FP16 gradients."),
    (
        "GRADSCALER",
        "RuntimeError: unscale_() has already been called on this optimizer since the last update().",
    ),
    ("GRADSCALER", "AssertionError: No inf checks were recorded for this optimizer."),
    ("GRADSCALER", "With GradScaler and fp16 the loss becomes NaN after 200 steps on 4 GPUs"),
    (
        "GRADSCALER",
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 0.0001",
    ),
    ("GRADSCALER", "my loss is nan with amp after a few hundred steps, only with DDP"),
    # DATA_SAMPLER
    ("DATA_SAMPLER", "All 8 GPUs train but an epoch takes as long as on one GPU."),
    ("DATA_SAMPLER", "Every GPU sees the same batches, the loss is identical on all ranks."),
    ("DATA_SAMPLER", "I get no speedup with 4 GPUs, each rank processes the whole dataset"),
    (
        "DATA_SAMPLER",
        "The shuffle is the same order every epoch on every rank, we never call set_epoch.",
    ),
    ("DATA_SAMPLER", "Training on 4 GPUs is not faster than on a single GPU"),
    ("DATA_SAMPLER", "the number of steps per epoch does not decrease when I add GPUs"),
    ("DATA_SAMPLER", "We see overlapping samples across ranks in the same epoch"),
    # VERSION_MISMATCH
    ("VERSION_MISMATCH", "NCCL WARN NCCL version mismatch between ranks: 2.18.1 vs 2.19.3"),
    (
        "VERSION_MISMATCH",
        "Node A has torch 2.1.0 and node B has torch 2.3.1: different torch versions across nodes, the job hangs at init.",
    ),
    (
        "VERSION_MISMATCH",
        "ImportError: /usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
    ),
    (
        "VERSION_MISMATCH",
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
    ),
    (
        "VERSION_MISMATCH",
        "node-a:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\nnode-b:22:22 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\nnode-a:11:30 [0] NCCL INFO Channel 00/02 :    0   1",
    ),
    (
        "VERSION_MISMATCH",
        "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
    ),
    # OOM
    (
        "OOM",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 15.25 MiB is free.",
    ),
    (
        "OOM",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 10.76 GiB total capacity; 8.21 GiB already allocated; 1.20 GiB free; 8.52 GiB reserved in total by PyTorch)",
    ),
    (
        "OOM",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of 23.64 GiB of which 3.06 MiB is free. Process 3344 has 7.86 GiB memory in use. Process 3345 has 7.86 GiB memory in use. Process 3346 has 7.86 GiB memory in use.",
    ),
    (
        "OOM",
        "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu')",
    ),
    ("OOM", "RuntimeError: CUDA error: out of memory"),
    ("OOM", "HIP out of memory. Tried to allocate 2.00 GiB (GPU 0; 63.98 GiB total capacity)"),
    (
        "OOM",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to allocate 4294967296 bytes.",
    ),
    (
        "OOM",
        "E0501 12:00:00.000 1 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: -9) local_rank: 3 (pid: 4242) of binary: /usr/bin/python",
    ),
]

ANSI_RED, ANSI_RESET = "\x1b[31;1m", "\x1b[0m"


def _top(text: str) -> str | None:
    d = explain_text(text)
    return d.matches[0].signature.root_cause if d.matches else None


@pytest.mark.parametrize(
    ("cause", "text"), EXAMPLES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(EXAMPLES)]
)
def test_example_is_diagnosed(cause: str, text: str) -> None:
    assert _top(text) == cause


@pytest.mark.parametrize(("cause", "text"), EXAMPLES[::3], ids=[c for c, _ in EXAMPLES[::3]])
def test_prefixes_and_colour_do_not_matter(cause: str, text: str) -> None:
    """The same message as torchrun --tee, mpirun and a coloured terminal print it."""
    for prefix in ("[rank3]: ", "[default3]:", "[1,3]<stderr>:", "2024-05-01 12:00:00,123 - "):
        wrapped = "\n".join(prefix + line for line in text.splitlines())
        assert _top(wrapped) == cause, prefix
    assert _top(ANSI_RED + text + ANSI_RESET) == cause


@pytest.mark.parametrize(
    ("cause", "text"),
    [(c, t) for c, t in EXAMPLES if "\n" not in t and len(t) > 80][::2],
)
def test_wrapped_over_two_lines(cause: str, text: str) -> None:
    """Terminals and tickets wrap long messages; a break between words must not hide them."""
    words = text.split(" ")
    half = len(words) // 2
    assert _top(" ".join(words[:half]) + "\n" + " ".join(words[half:])) == cause


@pytest.mark.parametrize(
    ("cause", "text"),
    [(c, t) for c, t in EXAMPLES if "\n" not in t and len(t) > 100][1::2],
)
def test_hard_wrapped_at_fixed_width(cause: str, text: str) -> None:
    """Copied from a terminal 80 columns wide: lines cut inside words."""
    assert _top("\n".join(text[i : i + 80] for i in range(0, len(text), 80))) == cause


def test_every_category_has_two_or_more_signatures_and_examples() -> None:
    per_sig = Counter(s.root_cause for s in (*SIGNATURES, *PROSE_SIGNATURES))
    per_example = Counter(c for c, _ in EXAMPLES)
    for cause in ROOT_CAUSES:
        assert per_sig[cause] >= 2, cause
        assert per_example[cause] >= 4, cause


def test_table_is_well_formed() -> None:
    codes = [s.code for s in SIGNATURES]
    assert len(codes) == len(set(codes))
    for s in SIGNATURES:
        assert re.fullmatch(r"DDX\d{3}", s.code)
        assert s.root_cause in ROOT_CAUSES
        assert s.why and s.fix and s.confirm_with.startswith("ddpdoctor")
        assert all(k == k.lower() for k in s.keywords)


def test_prefilter_keeps_every_example_line() -> None:
    """The prefilter (and grep -E in the benchmark) must never drop a line a signature needs."""
    rx = re.compile(prefilter_pattern(), re.I)
    for _, text in EXAMPLES:
        if any(not m.signature.phrases for m in explain_text(text).matches):
            assert rx.search(text), text  # prose is read in the head, without the prefilter


def test_noise_is_not_diagnosed() -> None:
    noise = "\n".join(
        [
            "epoch 3 step 1200 loss 0.2345 lr 3e-4",
            "node1:123:456 [0] NCCL INFO Channel 00/32 :    0   1   2   3",
            "node1:123:456 [0] NCCL INFO Connected all rings",
            "Saving checkpoint to /ckpt/model_3.pt",
            '  File "/usr/lib/python3.10/site-packages/torch/distributed/rendezvous.py", line 12',
            "NCCL version 2.21.5+cuda12.4",
        ]
    )
    assert explain_text(noise).matches == []


HEALTHY_RUN = """\
W1129 10:00:00.000000 100 torch/distributed/run.py:793 Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
[default0]:node1:2001:2001 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
[default0]:node1:2001:2001 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation
[default0]:node1:2001:2001 [0] NCCL INFO cudaDriverVersion 12020
[default0]:NCCL version 2.18.1+cuda12.1
[default1]:node1:2002:2002 [1] NCCL INFO NCCL version 2.18.1+cuda12.1
[default0]:node1:2001:2050 [0] NCCL INFO Failed to open libibverbs.so[.1]
[default0]:node1:2001:2050 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
[default0]:node1:2001:2050 [0] NCCL INFO Using network Socket
[default0]:node1:2001:2050 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
[default0]:node1:2001:2050 [0] NCCL INFO Connected all rings
[default0]:node1:2001:2050 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 18000 commId 0x1 - Init COMPLETE
[rank0]:[W1129 10:00:05.1 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect. Specify device_ids in barrier() to force use of a particular device, or call init_process_group() with a device_id.
[default0]:epoch 0 step 100 loss 2.3011 lr 3e-4 (1234.5 samples/s)
[default0]:Saving checkpoint to /ckpt/epoch0.pt
[default0]:node1:2001:2060 [0] NCCL INFO [Service thread] Connection closed by localRank 1
[default0]:node1:2001:2001 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 cudaDev 0 busId 18000 - Abort COMPLETE
[rank0]:[W1129 10:10:00.1 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only recently been added. For more info, please refer to https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())
"""


@pytest.mark.parametrize("engine", ["grep", "python"])
def test_healthy_run_has_no_findings(engine: str) -> None:
    """Real lines of a run that worked (NCCL INFO, torchrun and c10d warnings) raise nothing."""
    assert explain_text(HEALTHY_RUN, engine).matches == []
