"""Symptoms described in words: what support tickets say when there is no traceback.

A ticket says "no speed-up with 4 GPUs", "GPU 0 has extra processes after --resume", "hangs
with 4 or more GPUs unless NCCL_P2P_DISABLE=1". Each prose signature below is a set of scored
phrases (their paraphrases included); the phrases found add up, capped per signature, so that
several weak signals make a diagnosis while a real traceback signature still outweighs them
(see signatures.WEIGHT and matcher.rank_candidates).

Prose is read in the head of the input (scan.HEAD_CAP): tickets are short, and reading a 2 GB
log for prose would cost the speed the prefilter buys. Machine lines (NCCL INFO, frames, metrics)
and repeats are left out, at most TEXT_CAP characters are read, and each phrase is skipped
unless one of its literal words is in the text. The text is joined across line breaks, so a
sentence wrapped by a terminal or an issue form still matches.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from ddpdoctor.triage.signatures import (
    NCCL_PLUGIN_SKEW,
    NCCL_VERSION_SKEW,
    PROSE,
    SIGNATURES,
    Phrase,
    Signature,
)

TEXT_CAP = 32 * 1024  # characters of prose text the phrases read (after machine lines go)
# Lines that are machine output, never a person's words: NCCL INFO, C++ and Python frames.
_MACHINE = re.compile(r"NCCL INFO|^\s*frame #\d+|^\s*File \"|^\s*\^+\s*$|^[\s\d.,:|+-]*$")
PROSE_CAP = 8.0  # the most one prose signature can weigh (a cause weighs 10)

_CHECK_DEV = "ddpdoctor check --only rank_device"
_CHECK_SAMPLER = "ddpdoctor check --only sampler"
_CHECK_SCALER = "ddpdoctor check --only gradscaler"
_CHECK_AR = "ddpdoctor check --only allreduce"
_CHECK_PG = "ddpdoctor check --only process_group"
_CHECK_ENV = "ddpdoctor check --only env"
_LINT = "ddpdoctor lint train.py"
_ENV = "ddpdoctor env (on every node)"

# Building blocks of the phrases (the joined text has no line breaks).
_MULTI = (
    r"(?:\d+|two|three|four|eight|multiple|several|more|many|all)\s+(?:gpus?|cards?|nodes|devices)"
)
_EACH = r"(?:every|each|all(?:\s+the)?|all\s+\d+)\s+(?:gpus?|ranks?|process(?:es)?|workers?|devices?|cards?|nodes?)"
_HANG = (
    r"\b(?:hangs?|hung|hanging|stuck|freez\w*|froze|deadlock\w*|never\s+(?:returns?|finish\w*|"
    r"complet\w*|ends?|starts?)|blocks?\s+forever|waits?\s+forever|forever)\b"
)
_GPU0 = (
    r"(?:gpu\s*:?\s*0|gpu0|cuda:0|device\s+0|the\s+(?:first|primary|main)\s+gpu|rank\s*0'?s?\s+gpu)"
)
_AMP = r"\b(?:amp|autocast|fp16|float16|half\s+precision|mixed[\s-]precision|grad(?:ient)?[\s_]?scaler|scaler|precision\s*=\s*16|loss\s+scal\w*)\b"
_TOPO = (
    r"\b(?:pcie|pci[\s-]?e?\s+switch\w*|pxb|pix|phb|nvlink|p2p|peer[\s-]to[\s-]peer|topolog\w*|"
    r"acs|iommu|vt-d|rtx\s*[34]090|consumer\s+gpus?)\b"
)
_WORKS = r"(?:works?|worked|fix\w*|solv\w*|resolv\w*|help\w*|goes\s+away|went\s+away|avoids?|workaround|makes?\s+it\s+(?:work|run)|runs?\s+fine|only\s+way)"


def _p(regex: str, weight: float, label: str) -> Phrase:
    return Phrase(re.compile(regex, re.IGNORECASE), weight, label, _literals(regex))


def _literals(regex: str) -> tuple[str, ...]:
    """Lowercase literal fragments of a phrase (3+ letters outside classes and escapes): any
    match contains one of them, so a text containing none is skipped without the regex."""
    src = re.sub(r"\\[a-zA-Z]", " ", regex)  # \s \w \d \b ...
    src = re.sub(r"[A-Za-z][?*]|[A-Za-z]\{0,", " ", src)  # an optional letter ends a literal
    src = re.sub(r"\[[^\]]*\]|\{[^}]*\}|\(\?[:!=<]+", " ", src)
    return tuple(sorted({w.lower() for w in re.findall(r"[A-Za-z_]{3,}", src)}))


def _prose(
    code: str,
    root_cause: str,
    title: str,
    phrases: tuple[Phrase, ...],
    why: str,
    fix: str,
    confirm_with: str,
    cap: float = PROSE_CAP,
) -> Signature:
    """A prose signature; `cap` is the most its phrases can add up to."""
    return Signature(
        code,
        root_cause,
        title,
        (),
        (),
        why,
        fix,
        confirm_with,
        tier=PROSE,
        weight=cap,
        phrases=phrases,
    )


PROSE_SIGNATURES: tuple[Signature, ...] = (
    _prose(
        "DDX211",
        "DATA_SAMPLER",
        "Every rank trains on the same data (no DistributedSampler)",
        (
            _p(
                rf"(?:same|identical)\s+(?:data|batch(?:es)?|samples?|images?|order|inputs?|loss(?:es)?(?:\s+values?)?)\s+(?:on|for|in|across|from)\s+{_EACH}",
                4,
                "says every rank gets the same batches",
            ),
            _p(
                rf"identical\s+batches|{_EACH}\s+(?:has|have|produces?|shows?)\s+the\s+same\s+loss",
                4,
                "says the ranks see identical batches",
            ),
            _p(
                rf"{_EACH}\s+(?:see|sees|get|gets|receive|receives|load|loads|process|processes|walks?|uses?)\s+(?:exactly\s+|just\s+|always\s+)?(?:the\s+)?(?:same|identical|(?:whole|entire|full)\s+data\s*set)",
                4,
                "says each rank walks the whole dataset",
            ),
            _p(
                r"(?:whole|entire|full)\s+data\s*set\s+(?:goes|passes|is\s+(?:used|loaded|processed))\s+(?:through|on|by|in)\s+(?:every|each)",
                4,
                "says the whole dataset goes through every GPU",
            ),
            _p(
                r"(?:no|without\s+a?|missing|not\s+us\w+\s+(?:a\s+)?|forgot\s+(?:the\s+|a\s+)?|commented\s+out\s+the\s+|instead\s+of\s+(?:a\s+)?)\s*distributed[\s_]?sampler",
                4,
                "says there is no DistributedSampler",
            ),
            _p(
                r"distributed[\s_]?sampler\s+(?:is\s+)?(?:not\s+used|commented\s+out|missing)|commented\s+out\s+the\s+distributed\s+sampler",
                4,
                "says the DistributedSampler is not used",
            ),
            _p(
                r"randomsampler.{0,80}distributed|distributed.{0,80}randomsampler",
                3,
                "uses a RandomSampler under DDP",
            ),
            _p(
                r"(?:does\s*n[o']t|not)\s+(?:seem\s+to\s+)?split\s+(?:the\s+)?data\s*set",
                4,
                "says the dataset is not split between GPUs",
            ),
            _p(
                r"(?:overlapping|duplicated?)\s+(?:data|samples|batches)\s+(?:across|between|on)\s+(?:ranks|gpus|processes)",
                4,
                "says samples overlap across ranks",
            ),
        ),
        "A plain DataLoader gives every rank the whole dataset in the same order: N GPUs train "
        "on identical batches, the effective batch does not grow and an epoch takes as long as "
        "on one GPU.",
        "DataLoader(ds, sampler=DistributedSampler(ds), shuffle=False, ...) and "
        "sampler.set_epoch(epoch) at the start of every epoch.",
        f"{_CHECK_SAMPLER}; {_LINT}",
    ),
    _prose(
        "DDX212",
        "DATA_SAMPLER",
        "More GPUs but no speed-up per epoch (no work split)",
        (
            _p(
                r"(?:no|zero|without\s+any|not\s+(?:see|get)\s+any)\s+(?:speed[\s-]?up|speed\s+gain|acceleration|faster\s+training)",
                3,
                'says "no speed-up"',
            ),
            _p(
                r"(?:can\s*not|can't|cannot|unable\s+to|could\s*n[o']t|does\s*n[o']t|did\s*n[o']t)\s+(?:train\s+\w+\s+)?(?:accelerate|speed\s+up|get\s+faster|be\s+faster|train\s+faster|train\s+models\s+faster)",
                3,
                'says "cannot train faster"',
            ),
            _p(
                rf"{_MULTI}.{{0,80}}(?:not\s+faster|no\s+faster|same\s+(?:training\s+)?(?:speed|time)|as\s+slow\s+as|as\s+long\s+as|takes?\s+(?:even\s+)?longer|slower)",
                3,
                "says more GPUs take as long",
            ),
            _p(
                r"epoch\s+(?:takes|took)\s+(?:just\s+|about\s+|even\s+)?(?:as\s+long\s+as|longer\s+than)\s+(?:on|with)\s+(?:one|1|a\s+single)",
                4,
                "says an epoch takes as long as on one GPU",
            ),
            _p(
                r"(?:number\s+of\s+)?(?:steps|iterations|batches)\s+(?:per|for\s+each|in\s+each|of\s+(?:an?|each))\s+epoch.{0,60}(?:does\s*n[o']t|did\s*n[o']t|not|never)\s+(?:decrease|change|drop|go\s+down|shrink)",
                5,
                "says the steps per epoch do not drop with more GPUs",
            ),
            _p(
                r"(?:same|identical)\s+number\s+of\s+(?:steps|iterations|batches)|len\(\s*\w*(?:data_?)?loader\s*\)\s+is\s+the\s+same",
                4,
                "says the number of steps per epoch stays the same",
            ),
            _p(
                r"(?:same\s+(?:time|speed)\s+as|not\s+faster\s+than|identical\s+to)\s+(?:on\s+|with\s+)?(?:a\s+)?(?:single|one|1)[\s-](?:gpu|card)(?:\s+training)?",
                3,
                "says multi-GPU is no faster than one GPU",
            ),
            _p(
                rf"(?:converges?\s+slower|worse\s+than\s+(?:on\s+|with\s+)?(?:a\s+)?(?:single|one|1)[\s-]gpu|loss\s+(?:does\s*n[o']t|did\s*n[o']t|does\s+not|won't)\s+(?:fall|decrease|go\s+down|drop)).{{0,120}}(?:ddp|{_MULTI}|distributed)|(?:ddp|{_MULTI}|distributed).{{0,120}}(?:converges?\s+slower|worse\s+than\s+(?:on\s+|with\s+)?(?:a\s+)?(?:single|one|1)[\s-]gpu|loss\s+(?:does\s*n[o']t|does\s+not|won't)\s+(?:fall|decrease|go\s+down|drop))",
                3,
                "says the loss does not fall better with more GPUs",
            ),
        ),
        "If each epoch has as many steps with N GPUs as with one, each rank iterates the full "
        "dataset: the DataLoader has no DistributedSampler, so there is no work split.",
        "Use DistributedSampler (the number of steps per epoch must drop by N) and call "
        "sampler.set_epoch(epoch) every epoch.",
        f"{_CHECK_SAMPLER}; {_LINT}",
    ),
    _prose(
        "DDX213",
        "DATA_SAMPLER",
        "Same shuffle order every epoch (set_epoch not called)",
        (
            _p(
                r"(?:without|missing|no|forgot(?:\s+to\s+call)?|never\s+call(?:ed|s)?|commented\s+out)\s+(?:the\s+)?(?:\w+\.)*set_epoch|set_epoch\S*\s+(?:call\s+)?is\s+commented\s+out",
                3,
                "says set_epoch is not called",
            ),
            _p(
                r"(?:same|identical)\s+(?:shuffle|order|permutation|batches)\s+(?:in\s+|on\s+)?every\s+epoch",
                4,
                "says every epoch has the same order",
            ),
        ),
        "DistributedSampler shuffles with seed + epoch; without set_epoch(epoch) the epoch stays "
        "0 and every epoch repeats the same order on every rank.",
        "Call sampler.set_epoch(epoch) at the start of each epoch, before iterating the "
        "DataLoader.",
        f"{_CHECK_SAMPLER}; {_LINT}",
    ),
    _prose(
        "DDX133",
        "DEVICE_MAPPING",
        "Every rank works on GPU 0",
        (
            _p(
                rf"(?:extra|additional|several|multiple|many|\d+(?:\s+additional)?)\s+(?:python\s+)?(?:processes|contexts|threads)\s+(?:\w+\s+){{0,3}}(?:on|in|sit\s+on|appear\s+on)\s+{_GPU0}",
                4,
                "says GPU 0 holds extra processes",
            ),
            _p(
                rf"{_GPU0}\s+(?:has|holds|carries|shows|gets|with)\s+(?:\w+\s+){{0,2}}(?:extra|additional|several|multiple|many|more|\d+)\s+(?:\w+\s+)?(?:processes|contexts|threads)",
                4,
                "says GPU 0 holds extra processes",
            ),
            _p(
                rf"(?:each|every|all(?:\s+the)?)\s+(?:other\s+)?(?:process(?:es)?|ranks?|workers?)\s+(?:\w+\s+){{0,4}}(?:allocates?|allocating|uses?|using|takes?|puts?|lands?|are|is|create\w*)\s+(?:\w+\s+){{0,4}}(?:on|of)\s+{_GPU0}",
                4,
                "says every process touches GPU 0",
            ),
            _p(
                rf"(?:much|significantly|a\s+lot|far)?\s*(?:more|higher|extra|unbalanced|uneven)\s+(?:gpu\s+)?memory\s+(?:usage\s+)?(?:on|of|for|than\s+the\s+others\s+on)\s+{_GPU0}|{_GPU0}\s+(?:uses|has|takes|gets|got|allocates|consumes|occupies|occupied|needs)\s+(?:much\s+|significantly\s+|a\s+lot\s+|far\s+)?more\s+(?:gpu\s+)?memory|unbalanced\s+gpu\s+(?:memory|load)|gpu\s+load\s+is\s+unbalanced",
                4,
                "says GPU 0 uses more memory than the others",
            ),
            _p(
                r"(?:without|missing|never\s+call\w*|forgot\w*|no)\s+(?:\w+\s+){0,3}(?:torch\.cuda\.)?set_device|set_device\s+(?:step\s+)?(?:was\s+|is\s+)?missing|switch\s+(?:its|their)\s+default\s+device",
                3,
                "says set_device is not called",
            ),
            _p(r"set_device", 1, "mentions set_device"),
            _p(
                rf"process(?:es)?\s+(?:\w+[\s,]+){{0,10}}(?:take|takes|use|uses|allocate\w*|occup\w+|hold\w*|consum\w+)\s+(?:\w+\s+){{0,4}}(?:space\s+)?(?:on|of)\s+{_GPU0}",
                4,
                "says the processes of the other GPUs take memory on GPU 0",
            ),
            _p(
                r"(?:processes|contexts)\s+on\s+gpus?\s+.{0,40}not\s+(?:assigned|given|used)|opens?\s+processes\s+on\s+gpus",
                3,
                "says processes appear on GPUs they were not given",
            ),
            _p(
                rf"(?:every|each)\s+rank\s+(?:\w+\s+)?on\s+(?:the\s+same\s+gpu|{_GPU0})|all\s+(?:ranks|processes)\s+(?:run|are|sit)\s+on\s+(?:the\s+same\s+gpu|{_GPU0})",
                4,
                "says all ranks run on one GPU",
            ),
        ),
        "Without torch.cuda.set_device(local_rank) every process creates its CUDA context and "
        "tensors on cuda:0: GPU 0 fills up and serialises the work while the other GPUs idle.",
        "torch.cuda.set_device(local_rank) first thing, model.to(local_rank), "
        "DDP(model, device_ids=[local_rank]), and map_location when loading checkpoints.",
        f"{_CHECK_DEV}; {_LINT}",
    ),
    _prose(
        "DDX331",
        "OOM",
        "Resuming puts every rank's checkpoint copy on GPU 0",
        (
            _p(
                rf"(?:resum\w*|--resume|init_from=resume|load\w*\s+(?:\w+\s+)?(?:checkpoint|snapshot|state_dict|\.pt)|from\s+(?:a|the|an\s+old|an\s+existing)\s+(?:checkpoint|snapshot|\.pt)|torch\.load).{{0,220}}(?:{_GPU0}|(?:more|extra|high|higher)\s+(?:gpu\s+)?memory|out\s+of\s+memory|vram|memory\s+(?:usage|on))",
                5,
                "says GPU memory grows when resuming from a checkpoint",
            ),
            _p(
                rf"(?:{_GPU0}|(?:more|extra)\s+(?:gpu\s+)?memory|out\s+of\s+memory|vram).{{0,220}}(?:resum\w*|--resume|init_from=resume|(?:load\w*|from)\s+(?:\w+\s+){{0,2}}(?:checkpoint|snapshot|\.pt))",
                5,
                "says GPU memory grows when resuming from a checkpoint",
            ),
            _p(r"map_location", 1, "mentions map_location"),
        ),
        "torch.load restores tensors onto the device they were saved from, cuda:0 for a "
        "checkpoint saved by rank 0: every rank then allocates a full copy on GPU 0.",
        "torch.load(path, map_location='cpu') (or f'cuda:{local_rank}'), then "
        "model.load_state_dict(...); save only on rank 0.",
        f"{_LINT}; {_CHECK_DEV}",
        cap=9.0,  # resuming explains GPU-0 memory better than a missing set_device does
    ),
    _prose(
        "DDX332",
        "OOM",
        "The ticket describes running out of memory",
        (
            _p(
                r"(?:ran|runs?|running|go(?:es)?|went)\s+out\s+of\s+(?:gpu\s+|cuda\s+|host\s+)?memory|\boom\b|out[\s-]of[\s-]memory",
                3,
                "says a rank ran out of memory",
            ),
            _p(
                r"(?:more|enough|lack\s+of|not\s+enough|limited)\s+(?:host\s+|cpu\s+|system\s+)?(?:ram|memory)\s+.{0,60}(?:killed|fixed|solved|machine)|oom[\s-]killer|dmesg",
                2,
                "points at host memory (OOM killer)",
            ),
        ),
        "A rank ran out of (GPU or host) memory; under DDP the other ranks then wait in the next "
        "collective until they time out, so any timeout that follows is a symptom.",
        "Lower the per-rank batch size, use AMP or activation checkpointing, keep each rank on "
        "its own GPU (set_device) and nothing else on it; for host memory, fewer DataLoader "
        "workers per rank and lazy loading.",
        _CHECK_DEV,
    ),
    _prose(
        "DDX341",
        "GRADSCALER",
        "The ticket describes AMP loss scaling going wrong",
        (
            _p(
                r"(?:scale\s+values?|scaler\s+scales?|scal(?:e|ing)\s+factors?|grad\s*scaler\s+scales?)\s+(?:\w+\s+){0,4}(?:differ\w*|inconsistent|diverg\w*|are\s+not\s+the\s+same)|inconsistent\s+scale|(?:different|inconsistent)\s+(?:scale|scaling)\s+(?:values?|factors?)",
                5,
                "says the GradScaler scale differs between ranks",
            ),
            _p(
                rf"{_AMP}.{{0,120}}(?:loss|grad\w*|weights?|outputs?)\s+(?:\w+\s+){{0,3}}(?:is|are|becomes?|became|turns?\s+(?:into|to)|goes|went|gets?|got|stays?|always)\s+(?:to\s+|into\s+)?(?:nan|inf|-inf)\b",
                4,
                "says the loss turns NaN/inf under AMP",
            ),
            _p(
                rf"(?:loss|grad\w*)\s+(?:\w+\s+){{0,3}}(?:is|are|becomes?|became|turns?\s+into|goes|always)\s+(?:to\s+)?(?:nan|inf)\b.{{0,120}}{_AMP}",
                4,
                "says the loss turns NaN/inf under AMP",
            ),
            _p(
                r"(?:scale|_scale)\s+(?:\w+\s+){0,3}(?:falls?|fell|drops?|dropped|shrinks?|shrank|gets?\s+(?:very\s+)?small\w*|collaps\w*|keeps\s+getting\s+smaller)|grad\s+scale\s+(?:is\s+)?0\b",
                4,
                "says the loss scale collapses",
            ),
            _p(
                rf"{_AMP}.{{0,160}}(?:parameters?|weights?|models?)\s+(?:\w+\s+){{0,3}}(?:diverg\w*|no\s+longer\s+(?:the\s+same|in\s+sync|synchroni[sz]ed)|drift)",
                3,
                "says the model drifts apart across ranks under AMP",
            ),
        ),
        "Under AMP the GradScaler skips steps whose gradients hold inf/NaN and lowers the scale; "
        "when the ranks' scalers disagree (uneven steps, one scaler updated on some ranks only) "
        "or every step overflows, ranks diverge or the scale collapses and the loss stays NaN.",
        "One GradScaler per process, created once; scaler.scale(loss).backward(), "
        "scaler.step(opt), scaler.update() on every rank every step; compute the loss in "
        "autocast; prefer bf16 where the GPU supports it.",
        f"{_CHECK_SCALER}; {_LINT}",
    ),
    _prose(
        "DDX351",
        "NCCL_NETWORK",
        "A collective hangs on this GPU topology (peer-to-peer path broken)",
        (
            _p(
                rf"{_HANG}.{{0,200}}{_TOPO}|{_TOPO}.{{0,200}}{_HANG}|(?:deadlocks?|hangs?)\s+on\s+\d+x",
                5,
                "says a collective hangs on this GPU topology",
            ),
            _p(
                rf"nccl_p2p_disable\s*=\s*1.{{0,120}}{_WORKS}|{_WORKS}.{{0,80}}nccl_p2p_disable\s*=\s*1|(?:unless|only\s+with|except\s+with)\s+nccl_p2p_disable",
                5,
                "says NCCL_P2P_DISABLE=1 makes it work",
            ),
            _p(r"nccl_p2p_disable", 1, "mentions NCCL_P2P_DISABLE"),
            _p(
                r"intel_iommu\s*=\s*off|amd_iommu|iommu\s*=\s*(?:pt|off|soft)|pci\s*=\s*noacs|disabl\w+\s+(?:the\s+)?(?:vt-d|acs|iommu)|(?:acs|iommu|vt-d)\s+(?:is\s+)?(?:enabled|on)",
                5,
                "points at the IOMMU / PCIe ACS",
            ),
            _p(
                rf"{_HANG}.{{0,60}}(?:with|using|on)\s+(?:\d+|four|eight)\s+or\s+more\s+gpus|(?:\d+|four|eight)\s+or\s+more\s+gpus.{{0,60}}{_HANG}",
                3,
                "says it hangs from a number of GPUs up",
            ),
        ),
        "NCCL copies directly between GPUs over PCIe/NVLink. With the IOMMU or PCIe ACS enabled "
        "(common on bare metal and VMs), or on boards whose peer-to-peer path is broken, those "
        "copies are redirected or blocked: the first all_reduce never returns.",
        "Disable ACS on PCIe switches and set iommu=pt (or off) on the kernel command line; to "
        "confirm, NCCL_P2P_DISABLE=1 makes the hang go away (slower). Run nccl-tests.",
        f"{_CHECK_AR}; nvidia-smi topo -m",
    ),
    _prose(
        "DDX352",
        "NCCL_NETWORK",
        "The ticket points at the network between the nodes",
        (
            _p(
                r"ibdev2netdev|ibstat\b|ibv_devinfo|\broce\b|infiniband",
                1,
                "mentions the InfiniBand/RoCE fabric",
            ),
            _p(
                r"ibdev2netdev\W.{0,80}(?:differ\w*|different)",
                3,
                "says the NIC mapping differs between servers",
            ),
            _p(
                r"(?:nics?|hcas?|ib\s+cards?)\s+(?:\w+\s+){0,3}(?:can\s*not|can't|cannot|could\s*n[o']t)\s+(?:talk|reach|connect)",
                4,
                "says the NICs cannot reach each other",
            ),
            _p(
                r"nccl_ib_gid_index|nccl_ib_hca|nccl_socket_ifname",
                1,
                "mentions NCCL's network variables",
            ),
            _p(
                r"(?:flapping|broken|bad)\s+(?:ib\s+)?(?:link|cable|port)|port\s+error",
                3,
                "says a link is flapping",
            ),
        ),
        "Collectives between nodes run over InfiniBand/RoCE or TCP sockets; a link that flaps, a "
        "RoCE GID index that is wrong for the fabric, or an interface the other node cannot "
        "reach breaks them.",
        "Check the fabric (ibstat, ibv_devinfo, ibqueryerrors); for RoCE set NCCL_IB_GID_INDEX "
        "(often 3); pin NCCL_IB_HCA and NCCL_SOCKET_IFNAME to the data network on every node.",
        f"{_CHECK_AR} (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)",
    ),
    _prose(
        "DDX361",
        "COLLECTIVE_MISMATCH",
        "Ranks run different numbers of steps (uneven inputs)",
        (
            _p(
                r"(?:uneven|unequal|different|differing)\s+(?:number\s+of\s+)?(?:batches|inputs|iterations|steps|utterances|samples|training\s+batches)|(?:batches|inputs|utterances|samples)\s+(?:\w+\s+){0,3}(?:per|on\s+each|across)\s+(?:gpu|rank|node)s?\s+(?:differ|are\s+not\s+equal)|(?:different|unequal)\s+numbers?\s+of\s+(?:batches|utterances|samples|steps|iterations)",
                5,
                "says the ranks get different numbers of batches",
            ),
            _p(
                r"(?:progress\s+bar\s+)?(?:stays?|stuck|keeps?\s+(?:the\s+same|staying))\s+at\s+\d{1,3}%|\d{1,3}%\s+\d+/\d+\s+(?:\w+\s+){0,4}(?:forever|stuck)",
                3,
                "says the progress stops just before the end of the epoch",
            ),
            _p(
                rf"{_HANG}\s+(?:\w+\s+){{0,4}}(?:at\s+)?the\s+end\s+of\s+(?:the\s+|an\s+|each\s+)?(?:epoch|training)|(?:end|last\s+step)\s+of\s+(?:the\s+|an\s+)?epoch.{{0,60}}{_HANG}",
                2,
                "says it hangs at the end of an epoch",
            ),
            _p(
                r"different\s+keys\s+(?:across|on|between)\s+(?:ranks|processes|gpus)",
                4,
                "says ranks log different keys",
            ),
        ),
        "Every rank must issue the same collectives: a rank with fewer batches leaves the loop "
        "early while the others wait in their next gradient all-reduce for it, forever.",
        "Give every rank the same number of batches (DistributedSampler with drop_last=True, or "
        "equal shards), or wrap the loop in model.join() for uneven inputs; never call "
        "collectives in rank-dependent branches.",
        f"{_CHECK_SAMPLER}; {_CHECK_AR}; rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL",
    ),
    _prose(
        "DDX371",
        "UNUSED_PARAMETERS",
        "The ticket describes parameters outside the loss or reentrant checkpointing",
        (
            _p(
                r"unused\s+param\w*|param\w*\s+(?:\w+\s+){0,3}not\s+used\s+(?:in|for|by)\s+(?:the\s+)?(?:forward|loss)|find_unused_parameters\s*=\s*true\W{0,3}(?:fix|solv|work)",
                3,
                "mentions unused parameters",
            ),
            _p(
                r"gradient[\s_]checkpointing.{0,160}(?:ddp|distributed|multi[\s-]?gpu)|(?:ddp|distributed|multi[\s-]?gpu).{0,160}gradient[\s_]checkpointing|use_reentrant",
                4,
                "says it fails with gradient checkpointing under DDP",
            ),
        ),
        "DDP reduces every parameter's gradient once per step: a parameter that takes no part "
        "in the loss never reports, and reentrant activation checkpointing reports some twice.",
        "Make every parameter take part in the loss (or pass find_unused_parameters=True); with "
        "checkpointing use use_reentrant=False or static_graph=True.",
        f"{_LINT}; rerun with TORCH_DISTRIBUTED_DEBUG=INFO",
    ),
    _prose(
        "DDX381",
        "SHM",
        "The ticket points at /dev/shm in a container",
        (
            _p(r"/dev/shm", 2, "mentions /dev/shm"),
            _p(
                r"shm[\s_-]?size|--ipc\s*=?\s*host|ipc:\s*host",
                3,
                "mentions the container's shm size",
            ),
            _p(r"shared\s+memory", 1, "mentions shared memory"),
            _p(
                r"\bshm\s+\S+\s+\S+\s+\S+\s+(?:[89]\d|100)%\s+/dev/shm",
                3,
                "shows /dev/shm almost full",
            ),
            _p(
                r"(?:docker|container|kubernetes|pod)\b.{0,160}(?:nccl\s+error|bus\s+error|dataloader|unhandled\s+system\s+error|nccl\s+errors)|(?:nccl\s+errors?|bus\s+error|unhandled\s+system\s+error).{0,160}(?:docker|container)",
                6,
                "says NCCL or the DataLoader fails inside a container",
            ),
        ),
        "NCCL's intra-node transport and DataLoader workers keep their buffers in /dev/shm; a "
        "container's default (64 MiB, sometimes 16 MiB) is too small for several ranks.",
        "Give the container more shared memory (docker --shm-size=16g or --ipc=host; a "
        "Kubernetes emptyDir with medium: Memory on /dev/shm), or use fewer workers per rank.",
        f"{_ENV}: /dev/shm size",
    ),
    _prose(
        "DDX391",
        "RENDEZVOUS",
        "Nodes do not meet: the ticket describes a multi-node start that never completes",
        (
            _p(
                rf"(?:multi[\s-]?node|two\s+nodes|2\s+nodes|second\s+node|other\s+nodes?|across\s+nodes|between\s+(?:the\s+)?nodes|each\s+node|\d+\s+nodes).{{0,200}}(?:{_HANG}|waits?|never|time[sd]?\s+out|timeout|fails?)|(?:{_HANG}|never).{{0,120}}(?:multi[\s-]?node|two\s+nodes|2\s+nodes|second\s+node)",
                3,
                "says a multi-node start hangs",
            ),
            _p(
                r"(?:stuck|hangs?|hung|blocks?)\s+(?:\w+\s+){0,2}(?:in|at)\s+(?:torch\.distributed\.)?init_process_group|init_process_group\s+(?:\w+\s+){0,2}(?:hangs|never\s+returns|is\s+stuck|does\s+not\s+return)|none\s+(?:ever\s+)?(?:prints|returns)",
                3,
                "says init_process_group never returns",
            ),
            _p(
                r"rdzv[\s_-]?(?:id|endpoint|backend)|--node[\s_-]rank|node_rank|master_addr|rendezvous|run_id",
                1,
                "mentions the rendezvous settings",
            ),
            _p(
                r"connectivity\s+between\s+(?:the\s+)?(?:instances|nodes|machines)|(?:can\s*not|can't|cannot|could\s*n[o']t)\s+(?:reach|connect\s+to|ping)\s+(?:the\s+)?(?:master|other\s+node|each\s+other)|firewall",
                3,
                "says the nodes cannot reach each other",
            ),
            _p(
                r"(?:random|different)\s+(?:rendezvous\s+|rdzv[\s_]?)?ids?|assumes?\s+localhost|localhost\s+as\s+the\s+endpoint|same\s+node\s+rank|both\s+with\s+--node_rank",
                3,
                "points at mismatched rendezvous settings",
            ),
        ),
        "torchrun's nodes meet in a rendezvous: every node must use the same endpoint and id and "
        "reach it; a node started with other settings, or that cannot reach the master, waits "
        "until the rendezvous times out.",
        "Start every node with the same --nnodes, --rdzv-id and --rdzv-endpoint (a host every "
        "node can reach, not localhost); with the static backend give each node its own "
        "--node-rank; check the port with nc -zv HOST PORT from every node.",
        f"{_CHECK_PG} --nnodes N --rdzv-endpoint HOST:PORT",
    ),
    _prose(
        "DDX392",
        "PORT_IN_USE",
        "The ticket describes a second job on the same port",
        (
            _p(
                r"port\s+\d{2,5}\s+(?:is\s+)?(?:already\s+)?(?:in\s+use|taken|busy|occupied)",
                4,
                "says the port is taken",
            ),
            _p(
                r"(?:second|another|two|other)\s+(?:training\s+)?(?:jobs?|process(?:es)?|runs?|trainings?|experiments?)\s+(?:\w+\s+){0,4}(?:same\s+(?:machine|node|port|host))|start\s+another\s+(?:one|training|job)|running\s+(?:it\s+|the\s+\w+\s+)?(?:a\s+)?second\s+time",
                3,
                "says a second job starts on the same machine",
            ),
        ),
        "Each job's rank 0 listens on MASTER_PORT (29500 by default); a second job on the same "
        "node, or leftovers of a previous run, already hold it.",
        "Give each job its own --master-port (or --rdzv-endpoint host:PORT); kill leftover "
        "processes of earlier runs (ss -ltnp | grep PORT).",
        _CHECK_PG,
    ),
    _prose(
        "DDX393",
        "PG_NOT_INITIALIZED",
        "SyncBatchNorm or DDP used in a run without a process group",
        (
            _p(
                r"(?:sync\s*bn|syncbatchnorm|sync\s+batch\s*norm)\b.{0,200}(?:with|on|using|have|has|only)\s+(?:only\s+)?(?:a\s+)?(?:single|one|1)\s+(?:\w+\s+)?gpu|(?:with|on|using|have|has|only)\s+(?:only\s+)?(?:a\s+)?(?:single|one|1)\s+(?:\w+\s+)?gpu.{0,200}(?:sync\s*bn|syncbatchnorm|sync\s+batch\s*norm)",
                2,
                "says SyncBatchNorm is used on one GPU",
            ),
            _p(
                r"(?:process\s+group|init_process_group)\s+(?:\w+\s+){0,3}(?:not|never)\s+(?:been\s+)?(?:initiali[sz]ed|created|called)",
                4,
                "says the process group was never initialised",
            ),
        ),
        "SyncBatchNorm and DistributedDataParallel need a process group even on one GPU; a run "
        "started without torchrun (or without init_process_group) has none.",
        "Replace SyncBatchNorm with BatchNorm for single-GPU runs, or create a one-rank group "
        "(init_process_group with world_size=1) / start with torchrun --nproc-per-node 1.",
        f"{_CHECK_PG}; {_LINT}",
    ),
    _prose(
        "DDX394",
        "LAUNCH_ENV",
        "The script is started without a distributed launcher",
        (
            _p(
                r"(?:started|run|running|launched)\s+(?:\w+\s+){0,3}(?:with|using)\s+(?:plain\s+)?python\s+instead\s+of\s+torchrun|outside\s+(?:a|the)\s+(?:distributed\s+)?launcher|not\s+running\s+in\s+a\s+distributed\s+(?:training\s+)?setup",
                4,
                "says the script is started without torchrun",
            ),
        ),
        "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; `python "
        "train.py` sets none, so code that reads them fails at start-up.",
        "Start with torchrun --nproc-per-node=N train.py, or read the variables with defaults "
        "(os.environ.get('LOCAL_RANK', 0)) for single-process runs.",
        f"{_CHECK_ENV}; {_LINT}",
    ),
    _prose(
        "DDX395",
        "VERSION_MISMATCH",
        "The ticket describes versions that do not match",
        (
            _p(
                r"(?:version|versions|release)\s+(?:\w+\s+){0,2}(?:mismatch\w*|do(?:es)?\s*n[o']t\s+match|did\s*n[o']t\s+match|differ\w*|(?:are\s+)?out\s+of\s+sync)|mismatch(?:ed)?\s+(?:\w+\s+){0,2}(?:between|with)\s+(?:\w+\s+){0,4}(?:version|driver|pytorch|torch|nccl)|(?:did|does|do)\s*(?:not|n't)\s+match\s+(?:the\s+)?(?:\w+\s+){0,3}(?:driver|version|installed|mlnx|ofed)|matches\s+mlnx\s+ofed|(?:different|mixed)\s+(?:\w+\s+)?versions",
                4,
                "says two versions do not match",
            ),
            _p(r"fabric\s*manager|nvidia-fabricmanager", 2, "mentions the fabric manager"),
            _p(
                r"(?:driver|cuda|nccl|torch|pytorch|hpc-?x|ofed)\s+.{0,80}(?:downgrad\w+|upgrad\w+|reinstall\w*).{0,60}(?:work\w*|fix\w*|solv\w*)",
                2,
                "says changing a version fixed it",
            ),
            _p(
                r"(?:plugin|libnccl-net\.so)\s+.{0,80}(?:part\s+of|some)\s+(?:the\s+)?(?:nodes|hosts|machines)",
                3,
                "says only some nodes have the NCCL network plugin",
            ),
        ),
        "Different driver, NCCL, torch or fabric stacks on the nodes (or a user-space library "
        "that no longer fits the loaded driver) disagree on protocols: init fails or the first "
        "collective hangs.",
        "Use one image or lock file for every node; compare `ddpdoctor env` of each node "
        "(driver, CUDA, NCCL, torch) and reinstall the odd one.",
        f"{_CHECK_ENV}; {_ENV}",
    ),
    _prose(
        "DDX396",
        "COLLECTIVE_TIMEOUT",
        "The ticket describes a collective that timed out or a hang",
        (
            _p(
                r"(?:nccl|collective|watchdog|all_?reduce|barrier|all_?gather|ddp|distributed|multi[\s-]?gpu)\s+(?:\w+\s+){0,2}(?:time[sd]?\s*-?\s*out\b|timeout\b(?!\s*\(|\s*[:=]))",
                2,
                "says a collective timed out",
            ),
            _p(
                r"(?:while|when|during|after)\s+(?:\w+\s+){0,2}(?:saving|writing|evaluat\w+|validat\w+)\b.{0,120}(?:time[sd]?\s*-?\s*out|timeout|hang)|(?:time[sd]?\s*-?\s*out|timeout|hangs?)\s+(?:\w+\s+){0,4}(?:while|when|during|on|after)\s+(?:\w+\s+){0,2}(?:saving|writing|save|evaluat\w+)",
                2,
                "says the others timed out while one rank saved or evaluated",
            ),
            _p(_HANG, 1, "says the job hangs"),
        ),
        "A collective did not finish within the process-group timeout: one rank was slower "
        "(checkpointing, evaluation on rank 0), stuck, dead, or on another code path; the others "
        "waited and the watchdog ended them.",
        "Find the rank that stopped first; keep long rank-0-only work short or raise timeout= "
        "in init_process_group for it; rerun with TORCH_NCCL_ASYNC_ERROR_HANDLING=1, "
        "NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL.",
        f"{_CHECK_AR}; {_CHECK_PG}",
    ),
)

BY_CODE = {s.code: s for s in PROSE_SIGNATURES}
# Every signature explain knows: the line table, the comparisons, and prose (for catalogs).
ALL_SIGNATURES: tuple[Signature, ...] = (
    *SIGNATURES,
    NCCL_VERSION_SKEW,
    NCCL_PLUGIN_SKEW,
    *PROSE_SIGNATURES,
)


@dataclass
class ProseHit:
    """A prose signature found in the head: its weight, why, and where."""

    signature: Signature
    weight: float
    reasons: list[str]
    lines: list[int]  # line numbers of the phrases found, first occurrence each


# "loss 0.2345", "lr=3e-4", "step: 120": two of these on a line make it a metrics line.
_METRIC = re.compile(
    r"\b[a-z_/]{2,20}(?:\s*[:=]\s*-?\d+(?:\.\d+)?|\s+-?\d+\.\d+)(?:e[+-]?\d+)?\b", re.IGNORECASE
)


def prose_lines(lines: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """The lines a person may have written: machine lines and repeats dropped, TEXT_CAP kept."""
    out, seen, size = [], set(), 0
    for no, text in lines:
        if text in seen or _MACHINE.search(text) or len(_METRIC.findall(text)) >= 2:
            continue
        seen.add(text)
        out.append((no, text))
        size += len(text) + 1
        if size >= TEXT_CAP:
            break
    return out


def find(lines: Sequence[tuple[int, str]]) -> list[ProseHit]:
    """Score every prose signature over these (line number, text) lines, joined as one text."""
    lines = prose_lines(lines)
    if not lines:
        return []
    starts, parts, pos = [], [], 0
    for _, text in lines:
        starts.append(pos)
        parts.append(text)
        pos += len(text) + 1
    joined = " ".join(parts)
    lowered = joined.lower()
    hits: list[ProseHit] = []
    for sig in PROSE_SIGNATURES:
        weight, reasons, found_lines = 0.0, [], []
        for phrase in sig.phrases:
            if phrase.literals and not any(w in lowered for w in phrase.literals):
                continue
            m = phrase.pattern.search(joined)
            if m is None:
                continue
            weight += phrase.weight
            if phrase.label not in reasons:
                reasons.append(phrase.label)
            no = lines[bisect_right(starts, m.start()) - 1][0]
            if no not in found_lines:
                found_lines.append(no)
        if weight:
            hits.append(ProseHit(sig, min(weight, sig.base_weight), reasons, sorted(found_lines)))
    return hits


def amp_context(text: str) -> bool:
    """Whether a log or ticket shows mixed precision (GradScaler, autocast, fp16)."""
    return _AMP_CONTEXT.search(text) is not None


_AMP_CONTEXT = re.compile(
    r"grad_?scaler|scaler\.(?:step|scale|update)|\w*_scaler\.|mixed[\s-]precision|autocast|\bamp\b|\bfp16\b|float16|precision\s*=\s*16",
    re.IGNORECASE,
)
