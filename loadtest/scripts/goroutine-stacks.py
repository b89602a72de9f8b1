# goroutine-stacks.py: the stacks of a running Go process's goroutines,
# grouped by the function each goroutine started in: how many, and for each
# (stack size, KiB in use when read) how many goroutines have it.
#
# The runtime's own figures (MemStats.StackInuse, the harness's "stacks per
# stream") give the total only; this says which goroutine holds what. It
# reads runtime.allgs with gdb, so the binary must keep its symbols and
# DWARF (build it without -ldflags="-s -w"), for amd64:
#
#   GOWORK=off CGO_ENABLED=0 go build -trimpath -o /tmp/agentdock ./cmd/server
#   bin/loadtest -bin /tmp/agentdock -stores redis -idle 200 -settle 60s ...
#   # while the idle streams are open:
#   gdb -p "$(pgrep -f '/tmp/agentdock serve')" -batch -x loadtest/scripts/goroutine-stacks.py
#
# gdb stops the process while it reads; the counts are of that moment.
#
# FRAMES=<function> (in gdb's environment) also prints the frames of the
# first goroutine that started in that function, innermost first, each
# with its size in bytes, by following the frame pointers from where the
# goroutine was parked.
import collections
import os
import struct

import gdb

DEAD = 6  # runtime._Gdead


def function(pc):
    block = gdb.block_for_pc(pc)
    return block.function.name if block and block.function else hex(pc)


def word(addr):
    return struct.unpack("<Q", bytes(gdb.selected_inferior().read_memory(addr, 8)))[0]


def print_frames(g):
    hi = int(g["stack"]["hi"])
    sp, bp, pc = int(g["sched"]["sp"]), int(g["sched"]["bp"]), int(g["sched"]["pc"])
    print("frames of a goroutine %d bytes deep (bytes, function):" % (hi - sp))
    while bp and bp < hi:
        # amd64: a frame spans from its callee's to the frame pointer and
        # return address it saved.
        print("  %5d  %s" % (bp + 16 - sp, function(pc)))
        sp, pc, bp = bp + 16, word(bp + 8), word(bp)


frames_of = os.environ.get("FRAMES")
allgs = gdb.parse_and_eval("'runtime.allgs'")
groups = collections.defaultdict(collections.Counter)
for i in range(int(allgs["len"])):
    g = allgs["array"][i]
    if int(g["atomicstatus"]["value"]) == DEAD:
        continue
    size = int(g["stack"]["hi"]) - int(g["stack"]["lo"])
    used = int(g["stack"]["hi"]) - int(g["sched"]["sp"])
    name = function(int(g["startpc"]))
    groups[name][(size, (used + 1023) // 1024)] += 1
    if name == frames_of:
        print_frames(g)
        frames_of = None

print("goroutines | started in | (stack bytes, KiB in use): goroutines")
for name, sizes in sorted(groups.items(), key=lambda kv: -sum(kv[1].values())):
    print(sum(sizes.values()), "|", name, "|", dict(sorted(sizes.items())))
