"""gridmix.core.allocator, measured in fresh interpreters (a mode holds for the whole process): a
tensor freed and allocated again, as a training step does its activations, is reused without
page faults where the mode keeps blocks of its size, and mapped afresh (its memory bounded) where it
does not."""

import json
import subprocess
import sys

import pytest

from gridmix.core.allocator import keep_freed_memory

# allocate, touch and free a tensor of `mib` MiB, 17 times untimed (torch's aligned allocations
# grow the heap until freed neighbours merge and fit), then four times more: their minor page
# faults, and how much the peak resident size grew after the first
_REALLOCATE = """
import json, resource, sys, torch
from gridmix.core.allocator import keep_freed_memory
record = keep_freed_memory(sys.argv[1])
mib = int(sys.argv[2])
def touch():
    torch.empty(mib * 2**18).fill_(1.0)  # mib MiB of float32, freed on return
def usage():
    return resource.getrusage(resource.RUSAGE_SELF)
touch()
peak = usage().ru_maxrss
for _ in range(16):
    touch()
before = usage().ru_minflt
for _ in range(4):
    touch()
record.update(faults=usage().ru_minflt - before, grown_mib=(usage().ru_maxrss - peak) / 1024)
print(json.dumps(record))
"""


def _reallocation(mode: str, mib: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _REALLOCATE, mode, str(mib)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_reuse_keeps_blocks_up_to_32_mib_and_maps_larger_ones_afresh():
    pages = 4 * 16 * 2**20 // 4096  # four 16 MiB tensors' pages
    small, large = _reallocation("reuse", 16), _reallocation("reuse", 64)
    assert small["applied"] and small["faults"] < pages // 20, small
    assert large["faults"] >= 4 * pages // 2, large  # mapped and faulted in every time
    assert large["grown_mib"] < 64, large  # so the process does not hoard them


def test_retain_keeps_every_block_and_default_maps_large_ones_afresh():
    pages = 4 * 64 * 2**20 // 4096
    retained, default = _reallocation("retain", 64), _reallocation("default", 64)
    assert retained["applied"] and retained["faults"] < pages // 20, retained
    assert not default["applied"] and default["faults"] >= pages // 2, default


def test_an_unknown_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"allocator='jemalloc'; expected one of \('reuse'"):
        keep_freed_memory("jemalloc")
