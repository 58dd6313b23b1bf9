// Worker processes of the GPU suite: this test binary started as
//   braid_gpu_test --braid-gpu-worker --mode <mode> [--key value]... --idfd 3 --statusfd 4
// plays one rank (or, with --threads T, ranks 0..T-1 as threads of one process) of a
// communicator whose unique id it reads from --idfd. Modes:
//   matrix  --coll <name> --nranks N --rank R  the collective's correctness matrix
//   graph   --nranks N --rank R                an all-reduce captured in a CUDA Graph,
//                                              launched 3 times, checked each time
//   group   --nranks N --rank R                several ops in one group (eager and
//                                              captured: one kernel launch), checked
//   killed  --nranks 2 --rank R                a large all-reduce loop; rank 1 is killed
//                                              by the parent, rank 0 must see the error
// Common: --host 1 (host buffers and the null stream: the harness's own check without
// a GPU), --corrupt 1 (corrupt one checked element: the run must fail).
// Exit status 0 when every check passed; failures are printed to stderr.
#ifndef BRAID_TESTS_GPU_WORKER_H_
#define BRAID_TESTS_GPU_WORKER_H_

namespace braid_gpu {

/// Entry point of a worker (argv after kWorkerFlag). Returns the exit status.
int workerMain(int argc, char** argv);

}  // namespace braid_gpu

#endif  // BRAID_TESTS_GPU_WORKER_H_
