// NCCL between GPUs: the GPU device's DeviceCollectiveBackend
// (kernels/framework/collective.h). In one process the session's
// in-process executor meets a round's members (MirroredStrategy's
// replicas, one per GPU) and validates them; across processes
// (MultiWorkerMirroredStrategy) a cluster's executor agrees on each round
// at the group's leader, which hands every member the ncclUniqueId that
// rank 0's process made (NewCommunicatorId) and the round's place in the
// group's sequence, and each process runs its own ranks' part (RunRanks;
// the first round joins the communicator with ncclCommInitRank). A round
// runs as one NCCL group call:
//   reduce     ncclAllReduce (merge Add/Mul/Min/Max; Add then Div is
//              ncclAvg, for floating types)
//   gather     one ncclBroadcast per rank into its rows of every member's
//              output (members may differ in dimension 0, as on the CPU)
//   broadcast  ncclBroadcast from the sender's rank
// A communicator per set of GPUs (ncclCommInitAll at the set's first
// round, kept for the process), or per id and rank across processes. Each rank's call is enqueued
// on its GPU's compute stream, so the result is ordered before that GPU's later kernels and copies
// like any kernel's output, and each member completes once its work is enqueued. Rounds are
// enqueued under one lock, so the collectives of every communicator come in the same order on each
// GPU; joining a communicator across processes (which waits for every rank, and connects them)
// runs outside it, so two tasks of one process can hold ranks of one communicator.
//
// NCCL is loaded at run time (dlopen of libnccl.so.2): where it is missing
// the process says so once and the GPUs' collectives go through host
// memory, as GRAPHRUN_NCCL=0 makes them. ncclAvg scales each value by 1/n
// before it sums, so a mean through NCCL may differ in the last bits from
// the host path's sum-then-divide; every replica gets the same bits either
// way.
#ifndef GRAPHRUN_KERNELS_GPU_NCCL_BACKEND_H_
#define GRAPHRUN_KERNELS_GPU_NCCL_BACKEND_H_

#include <cstdint>

#include "kernels/framework/collective.h"

namespace graphrun {

// The process's NCCL backend; null when GRAPHRUN_NCCL=0 or NCCL does not
// load (the reason goes to stderr once).
DeviceCollectiveBackend* NcclCollectiveBackend();

// Rounds the NCCL backend ran since the process started (tests).
int64_t NcclRoundsRun();

}  // namespace graphrun

#endif  // GRAPHRUN_KERNELS_GPU_NCCL_BACKEND_H_
