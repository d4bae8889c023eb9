"""The baseline job for check_overhead.py: what a bare torchrun job costs (init gloo, barrier, exit)."""

import torch.distributed as dist

dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
