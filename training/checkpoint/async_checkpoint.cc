// Asynchronous periodic checkpoints (see async_checkpoint.h).
#include "training/checkpoint/async_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

namespace braid {
namespace train {
namespace {

/// The step of a complete checkpoint's directory name ("step-00000040"), or -1.
int64_t stepOfName(const std::string& name) {
  if (name.size() < 6 || name.compare(0, 5, "step-") != 0) return -1;
  for (size_t i = 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  return std::atoll(name.c_str() + 5);
}

}  // namespace

std::string checkpointStepDir(const std::string& root, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return root + "/" + name;
}

int64_t latestCheckpoint(const std::string& root, std::string* dir) {
  int64_t best = -1;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t s = stepOfName(it->path().filename().string());
    if (s > best && it->is_directory(ec)) best = s;
  }
  if (dir) *dir = best >= 0 ? checkpointStepDir(root, best) : std::string();
  return best;
}

AsyncCheckpointer::AsyncCheckpointer(std::string root, ProcessGroup* world, int keep, bool async)
    : root_(std::move(root)), world_(world), keep_(keep), async_(async) {}

AsyncCheckpointer::~AsyncCheckpointer() { join(); }

std::string AsyncCheckpointer::tmpDir(int64_t step) const {
  return checkpointStepDir(root_, step) + ".tmp-" + attempt_;
}

void AsyncCheckpointer::join() {
  if (writer_.joinable()) writer_.join();
}

void AsyncCheckpointer::setWorld(ProcessGroup* world, const std::string& attempt) {
  world_ = world;
  attempt_ = attempt;
}

void AsyncCheckpointer::abandon() {
  join();
  pendingStep_ = -1;
}

void AsyncCheckpointer::save(int64_t step, std::function<void(const std::string&)> write) {
  const double t0 = now();
  if (pending()) settle(true);  // the next checkpoint waits for the previous one
  pendingStep_ = step;
  status_ = 0;
  error_.clear();
  const std::string dir = tmpDir(step);
  writeStart_ = now();
  auto job = [this, dir, write = std::move(write)] {
    try {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw std::runtime_error("checkpoint: cannot create " + dir + ": " + ec.message());
      write(dir);
      writeDone_ = now();
      status_ = 1;
    } catch (const std::exception& e) {
      error_ = e.what();
      writeDone_ = now();
      status_ = -1;
    }
  };
  if (async_) {
    writer_ = std::thread(std::move(job));
  } else {
    const double tw = now();
    job();
    ioWaitSeconds_ += now() - tw;
    settle(true);
  }
  mainSeconds_ += now() - t0;
}

void AsyncCheckpointer::poll() {
  if (!pending()) return;
  const double t0 = now();
  settle(false);
  mainSeconds_ += now() - t0;
}

void AsyncCheckpointer::finish() {
  if (!pending()) return;
  const double t0 = now();
  settle(true);
  mainSeconds_ += now() - t0;
}

void AsyncCheckpointer::settle(bool wait) {
  if (wait) {
    const double tw = now();
    join();
    ioWaitSeconds_ += now() - tw;
  }
  const int mine = status_.load();
  const double ta = now();
  const double all = world_->allReduceScalar(double(mine), ReduceOp::kMin);
  agreeSeconds_ += now() - ta;
  if (all == 0) return;  // someone is still writing: ask again next step
  join();
  writeSeconds_ += writeDone_.load() - writeStart_;
  const int64_t step = pendingStep_;
  pendingStep_ = -1;
  if (all < 0) {
    if (mine < 0) std::fprintf(stderr, "braid-train: checkpoint of step %lld failed: %s\n",
                               static_cast<long long>(step), error_.c_str());
    if (world_->rank() == 0)
      std::fprintf(stderr, "braid-train: checkpoint of step %lld dropped (a rank could not write it)\n",
                   static_cast<long long>(step));
    return;
  }
  lastCommitted_ = step;
  ++committed_;
  if (world_->rank() != 0) return;
  // Every rank's files are on disk: publish the directory under its final name.
  const std::string final = checkpointStepDir(root_, step);
  std::error_code ec;
  std::filesystem::remove_all(final, ec);  // a stale one of an earlier job
  std::filesystem::rename(tmpDir(step), final, ec);
  if (ec) {
    std::fprintf(stderr, "braid-train: cannot commit checkpoint %s: %s\n", final.c_str(),
                 ec.message().c_str());
    return;
  }
  // Temporary directories of this step or earlier ones are stale (dropped writes, or
  // attempts cut short by a failure): the next checkpoint, which the other ranks may
  // already be writing, has a later step. Only the newest `keep` complete ones stay.
  std::vector<int64_t> steps;
  std::vector<std::filesystem::path> doomed;
  for (std::filesystem::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t tmpAt = name.find(".tmp-");
    if (tmpAt != std::string::npos) {
      const int64_t s = stepOfName(name.substr(0, tmpAt));
      if (s >= 0 && s <= step) doomed.push_back(it->path());
    } else if (stepOfName(name) >= 0) {
      steps.push_back(stepOfName(name));
    }
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; keep_ > 0 && i + size_t(keep_) < steps.size(); ++i)
    doomed.push_back(checkpointStepDir(root_, steps[i]));
  for (const auto& p : doomed) {
    std::error_code ignored;
    std::filesystem::remove_all(p, ignored);
  }
}

}  // namespace train
}  // namespace braid
