// Periodic checkpoints under one root directory, written while training goes on.
//
//   root/step-00000040/          a complete checkpoint (checkpoint.h's files)
//   root/step-00000045.tmp-e0/   one being written: never loaded, whatever it holds
//
// save(step, write), at a step boundary on every rank: the caller has already copied
// its state (CheckpointSnapshot: Trainer::snapshot()) into `write`; a background thread
// runs write(tmpDir) (shard + manifest files: file I/O only, never a collective), and the
// main thread returns to training at once. Completion is agreed on the main thread, so
// no two threads ever use one communicator: poll(), called once per step while a
// checkpoint is pending (on every rank alike, since checkpoint steps are the same
// everywhere), all-reduces MIN of "my write is done" (1), "still writing" (0) or
// "failed" (-1) over the world group; once the minimum is 1, world rank 0 renames the
// temporary directory to its final name (rename(2): atomic, so a directory named
// step-N is always complete) and deletes all but the newest `keep` checkpoints and the
// stale temporary directories of steps up to N (never a later one: the other ranks
// may already be writing the next checkpoint when rank 0 commits this one). A
// failed write anywhere drops that checkpoint (a warning; training goes on). The next
// save() first waits for the previous checkpoint (joins the writer, agrees, commits).
//
// With async = false, save() writes in the caller's thread and commits at once (the
// same files: async_checkpoint_test.cc checks they are identical).
//
// After a peer failure, abandon() joins this rank's writer (file I/O ends by itself)
// and forgets the pending checkpoint: it was never committed, so no survivor loads it.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "training/dist/process_group.h"

namespace braid {
namespace train {

/// "root/step-00000040".
std::string checkpointStepDir(const std::string& root, int64_t step);
/// The newest complete checkpoint under root: its step (its directory in *dir), or -1.
int64_t latestCheckpoint(const std::string& root, std::string* dir = nullptr);

class AsyncCheckpointer {
 public:
  /// keep: complete checkpoints kept (0: all). `attempt` names the temporary
  /// directories (".tmp-<attempt>"), so a retry after a failure never mixes files with
  /// a half-written directory of the same step.
  AsyncCheckpointer(std::string root, ProcessGroup* world, int keep, bool async);
  ~AsyncCheckpointer();  ///< joins the writer (a pending checkpoint is not committed)
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  /// Collective at a step boundary: finishes the previous checkpoint, then starts
  /// writing `write` for `step` (in the background when async).
  void save(int64_t step, std::function<void(const std::string& dir)> write);
  /// Collective once per step while a checkpoint is pending (a no-op otherwise).
  void poll();
  /// Collective: waits for the pending checkpoint and commits it.
  void finish();
  /// Local, after a failure: joins the writer, drops the pending checkpoint.
  void abandon();
  /// After a shrink: the new world group, and a new attempt name.
  void setWorld(ProcessGroup* world, const std::string& attempt);

  bool pending() const { return pendingStep_ >= 0; }
  const std::string& root() const { return root_; }
  int64_t lastCommitted() const { return lastCommitted_; }
  int committed() const { return committed_; }
  /// Seconds the training thread spent in save(), poll() and finish() (waiting for a
  /// previous write and agreeing), and seconds the writes took (background or not).
  double mainSeconds() const { return mainSeconds_; }
  double writeSeconds() const { return writeSeconds_; }
  /// Of mainSeconds: blocked on file I/O (synchronous: the writes themselves;
  /// asynchronous: waiting for a previous write still running), and in the completion
  /// all-reduces (which also absorb the ranks' skew that the next step would wait for).
  double ioWaitSeconds() const { return ioWaitSeconds_; }
  double agreeSeconds() const { return agreeSeconds_; }

 private:
  std::string tmpDir(int64_t step) const;
  /// Agrees (world MIN) on the pending write's status; commits when everyone is done.
  /// With wait, joins the writer first (the answer is then final).
  void settle(bool wait);
  void join();

  std::string root_, attempt_ = "e0";
  ProcessGroup* world_;
  int keep_;
  bool async_;
  int64_t pendingStep_ = -1;
  std::thread writer_;
  std::atomic<int> status_{0};  ///< of the pending write: 0 running, 1 done, -1 failed
  std::string error_;           ///< set by the writer before status_ = -1
  double writeStart_ = 0;
  std::atomic<double> writeDone_{0};
  int64_t lastCommitted_ = -1;
  int committed_ = 0;
  double mainSeconds_ = 0, writeSeconds_ = 0, ioWaitSeconds_ = 0, agreeSeconds_ = 0;
};

}  // namespace train
}  // namespace braid
